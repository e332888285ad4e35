"""Random submit / admit / finish / cancel / resume sequences against a model data plane.

The model plays the engine: it applies the Steps (BeginStep, CopyStep, EndStep) to page
and window contents (the token id each row holds), so a resume that hands back the wrong
rows, or a write into a shared page, fails here - not only the pool's own counts. With
snapshot slots (a recurrent family) it also plays the recurrent state (the token ids a
stream's state has taken in) and the slots (SnapStep: pending, restore, copy, with the
engine's capture rule), so a resume from a snapshot of another position or prompt fails.
"""
from hypothesis import event, settings, strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from server.planner.admission import Admission, Refused
from server.ranks.steps import BeginStep, CopyStep, EndStep, SnapStep

PR = 4
PREFIXES = [tuple(range(100, 100 + n)) for n in (0, 4, 6, 9)]


class AdmissionMachine(RuleBasedStateMachine):
    @initialize(paged=st.booleans(), cache=st.integers(0, 4), streams=st.integers(1, 3),
                slots=st.sampled_from([0, 1, 3]))
    def start(self, paged, cache, streams, slots):
        self.paged = paged
        self.adm = Admission(paged=paged, pages=8 if paged else cache, page_rows=PR, streams=streams,
                             context=24, cache_pages=cache, poison=True, snap_slots=slots)
        self.snaps = slots
        self.state = {}          # stream -> token ids its recurrent state took in (None: none yet)
        self.pending = {}        # stream -> its pending snapshot slot
        self.slots = {}          # slot -> the token ids of the state it keeps
        self.finished = []       # written ids of ended requests (a conversation's next turn)
        self.pages = {}          # page -> [token id or None per row]
        self.windows = {}        # stream -> [token id or None per row]
        self.tables = {}         # stream -> page ids
        self.prompts = {}        # req_id -> prompt ids
        self.order = []          # waiting req ids, submission order
        self.running = {}        # req_id -> stream
        self.n = 0

    # -- the engine's side -----------------------------------------------------------------
    def rows(self, stream):
        if self.paged:
            t = self.tables[stream]
            return [self.pages.setdefault(p, [None] * PR)[i] for p in t for i in range(PR)]
        return self.windows.setdefault(stream, [None] * 30)

    def write(self, stream, start, ids):
        if self.snaps and ids:                # one chunk through the recurrent state
            st_ = self.state[stream]
            assert st_ is not None and len(st_) == start, f"state at {st_}, chunk at {start}"
            b = (start + len(ids) - 1) // PR * PR
            if stream in self.pending and b >= start and b > 0:
                self.slots[self.pending[stream]] = tuple(st_) + tuple(ids[:b - start])
            self.state[stream] = st_ + list(ids)
        for r, tok in enumerate(ids, start):
            if self.paged:
                page = self.tables[stream][r // PR]
                assert self.adm.pool.refs(page) == 1 and not self.adm.pool.is_kept(page), \
                    f"row {r} written into shared or kept page {page}"
                self.pages[page][r % PR] = tok
            else:
                self.windows[stream][r] = tok

    def apply(self, step):
        if isinstance(step, SnapStep):
            if step.op == SnapStep.PENDING:
                self.pending[step.stream] = step.slot
            elif step.op == SnapStep.RESTORE:
                kept = self.slots[step.slot]
                assert len(kept) == step.at, f"slot {step.slot} holds {len(kept)} positions, not {step.at}"
                self.state[step.stream] = list(kept)
            else:
                self.slots[step.to] = self.slots[step.slot]
            return
        if isinstance(step, BeginStep):
            self.state[step.stream] = None if step.kept else []
            self.pending.pop(step.stream, None)
            self.tables[step.stream] = step.page_ids
            for p in step.page_ids[step.kept:]:
                self.pages[p] = [None] * PR           # poison: fresh pages hold nothing
            if not self.paged:
                self.windows[step.stream] = [None] * 30
        elif isinstance(step, CopyStep):
            w = self.windows[step.stream]
            for r in range(step.rows):
                page, i = step.page_ids[r // PR], r % PR
                if step.to_pages and page < 0:   # kept already: the resume checks prove its rows
                    continue
                if step.to_pages:
                    self.pages.setdefault(page, [None] * PR)[i] = w[r]
                else:
                    w[r] = self.pages[page][i]
        elif isinstance(step, EndStep):
            self.tables.pop(step.stream, None)
            self.pending.pop(step.stream, None)

    # -- rules -----------------------------------------------------------------------------
    @rule(prefix=st.sampled_from(PREFIXES), tail=st.lists(st.integers(0, 3), max_size=8),
          max_tokens=st.integers(0, 10))
    def submit(self, prefix, tail, max_tokens):
        req, ids = f"r{self.n}", prefix + tuple(tail)
        self.n += 1
        try:
            self.adm.request(req, ids, max_tokens)
        except Refused as e:
            assert not ids or max_tokens < 1 or len(ids) + max_tokens > 24 or e.code == "pool_too_small"
            return
        self.prompts[req] = ids
        self.order.append(req)

    @precondition(lambda self: self.finished)
    @rule(data=st.data(), tail=st.lists(st.integers(0, 3), min_size=1, max_size=5),
          max_tokens=st.integers(1, 6))
    def follow_up(self, data, tail, max_tokens):
        """A conversation's next turn: an ended request's rows and more."""
        prev = data.draw(st.sampled_from(self.finished))
        self.submit(prev[:18], list(tail), max_tokens)

    @rule()
    def admit(self):
        grants = self.adm.admit_ready()
        if not grants and self.order:
            event("head waits")
        assert [g.req_id for g in grants] == self.order[:len(grants)], "not first come first served"
        for g in grants:
            self.order.remove(g.req_id)
            for s in g.steps():
                self.apply(s)
            ids = self.prompts[g.req_id]
            assert g.resumed_rows < len(ids), "a resume must leave a token to prefill"
            assert self.rows(g.stream)[:g.resumed_rows] == list(ids[:g.resumed_rows]), "wrong resumed rows"
            if self.paged:
                assert len(g.page_ids) * PR >= len(ids) + 1
            if g.resumed_rows:
                event(f"resumed ({'pages' if self.paged else 'windows'}"
                      f"{', from a snapshot' if self.snaps else ''})")
            if self.snaps:                    # the state stands where the rows end, same ids
                if g.resumed_rows == 0:
                    self.state[g.stream] = self.state[g.stream] or []
                assert self.state[g.stream] == list(ids[:g.resumed_rows]), "wrong resumed state"
            self.write(g.stream, g.resumed_rows, ids[g.resumed_rows:])
            self.running[g.req_id] = g.stream
        assert not self.order or not grants or len(self.running) <= self.adm.streams

    @precondition(lambda self: self.running)
    @rule(data=st.data(), reply=st.lists(st.integers(0, 3), max_size=6))
    def finish(self, data, reply):
        req = data.draw(st.sampled_from(sorted(self.running)))
        stream = self.running.pop(req)
        ids = self.prompts.pop(req)
        reply = reply[:max(0, len(self.rows(stream)) - len(ids) - 1)]
        self.write(stream, len(ids), reply)
        for s in self.adm.finish(req, ids + tuple(reply)):
            self.apply(s)
        self.finished.append(ids + tuple(reply))

    @precondition(lambda self: self.running or self.order)
    @rule(data=st.data())
    def cancel(self, data):
        req = data.draw(st.sampled_from(sorted(self.running) + self.order))
        steps = self.adm.cancel(req)
        if req in self.running:
            assert steps == [EndStep(self.running.pop(req))]
        else:
            self.order.remove(req)
            assert steps == []
        self.prompts.pop(req)
        for s in steps:
            self.apply(s)

    @invariant()
    def pool_adds_up(self):
        if hasattr(self, "adm"):
            self.adm.check_integrity()
            p = self.adm.pool
            assert p.free + p.held + p.kept == p.total
            assert self.adm.running == len(self.running) and self.adm.waiting == len(self.order)

    def teardown(self):
        if hasattr(self, "adm"):
            for req in sorted(self.running) + list(self.order):
                self.adm.cancel(req)
            self.adm.check_integrity()
            assert self.adm.pool.held == 0 and self.adm.running == 0
            c = self.adm.cache
            assert sorted(c.slots_free + c.slots_kept) == list(range(self.snaps))


AdmissionMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestAdmission = AdmissionMachine.TestCase
