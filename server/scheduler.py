"""Continuous batching on rank 0: admit, build one Step a round, run it, sample, stream.

The engine runs in one thread of its own; the front end talks to it through an inbox
(requests, cancellations) and per-request asyncio queues (token events). Each round:

    1. take new requests and cancellations from the inbox
    2. admit what the planner can fund (FIFO; a request that waits blocks those behind it)
       -> BeginStep (and CopyStep to restore a kept prefix on windows)
    3. one RoundStep: every decoding stream's next token, then prefill chunks under the
       token budget (a round no stream decodes in may give a prompt `solo_chunk` tokens; a
       round others decode in holds its prefill chunks' attention reads to `prefill_keys`,
       so a long prompt interleaves with their decodes in small rounds: `prefill_take`)
       (with drafts: a decoding stream's chunk is its last token and its drafts,
       server/drafts/policy.py says how many)
    4. run it on every rank; sample rank 0's logits (a verify chunk's rows in order,
       server/drafts/verify.py); stream the tokens
    5. streams that ended -> finish (pages back, or kept as a prefix) -> EndStep

Each step is a file: this one the loop, the inbox and admission (1, 2); building a round
server/round_build.py (3); sampling and verifying it server/round_take.py (4); taking
tokens and finishing server/finishing.py (5). Rank 0's sampling is the driver's
`sampling` (server/host_sampling.py).

Events reach the front end's event loops through `Wake` (below), a thread of its own, so
the engine thread never waits on an event loop between two steps.

A shutdown (server/api/drain.py) closes admission with `stop_admitting`: every request
still waiting, and any that arrives later, ends at once with a 503 `shutting_down`; the
running ones go on until they finish or `end_running` ends them with the same error.

n > 1: choices 1.. of a request (GenRequest.follows names choice 0) are held until choice
0's prompt is prefilled; then its prompt's full pages go into the prompt cache
(Admission.keep_prompt) and the held choices enter admission, resuming from them: the
prompt is prefilled once, each choice only its last part page (at least one token, as any
resumed request). Resumed == fresh, so each choice is what a single request would be.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time

from server import finishing
from server.active import Active
from server.drafts.pace import Paced
from server.drafts.policy import ROW_COST
from server.requests import SHUTTING_DOWN, GenRequest, TokenEvent
from server.ranks.rank_errors import RankError
from server.ranks.steps import RoundStep
from server.round_build import build_round
from server.round_take import take_round

log = logging.getLogger("foldserve")


class Wake:
    """Hands the engine thread's events to their event loops from a thread of its own.

    `loop.call_soon_threadsafe` writes to the loop's self-pipe, a system call that lets the
    GIL go. With the step's threads keeping the cores busy the woken loop then often takes
    the core and the GIL and runs the token's whole way out (detokenizing, the SSE chunk,
    the socket write) before the engine thread has either back: each token's delivery sat
    between two steps (0.03-0.4 ms a token at batch 1 on the 2-core host, more the busier
    the box: receipt 2026-12-05-servehot). `put` only appends to a SimpleQueue (no system
    call while the GIL is held, the GIL kept); this thread makes the call as soon as it
    holds the GIL, at the latest when the engine thread enters its next step, which runs
    without the GIL. One thread, first in first out: each request's events reach its queue
    in the order they were put. A loop that is gone drops its events (as before). Once
    stopped, `put` hands an event over itself (an engine thread stuck past stop() still
    answers its requests)."""

    def __init__(self):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._lock = threading.Lock()        # uncontended but for stop(): keeps the GIL
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="foldserve-wake", daemon=True)
        self._thread.start()

    def put(self, loop, fn, ev) -> None:
        with self._lock:
            if not self._closed:
                self._q.put((loop, fn, ev))
                return
        self._hand(loop, fn, ev)

    @staticmethod
    def _hand(loop, fn, ev) -> None:
        try:
            loop.call_soon_threadsafe(fn, ev)
        except RuntimeError:                 # its event loop is gone
            pass

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            try:
                self._hand(*item)
            except Exception:                # never take the thread down: the next still goes
                log.exception("handing an event to its event loop")

    def stop(self, wait_s: float) -> None:
        """Deliver what was put, then end (waits up to wait_s); later events go at once."""
        with self._lock:
            self._closed = True
            self._q.put(None)
        self._thread.join(timeout=wait_s)


class Scheduler:
    IDLE_TICK_S = 0.5          # an idle engine wakes this often to check the ranks (driver.check)
    STOP_WAIT_S = 30.0         # stop() waits this long for the engine thread (a stuck step)
    MTP_KEPT = 256             # trunk rows a stream's deferred MTP pass may keep (_after_round)

    def __init__(self, driver, admission, *, context: int, prefill_chunk: int = 256,
                 token_budget: int | None = None, seed_salt: int = 0, metrics=None,
                 solo_chunk: int | None = None, prefill_keys: int | None = None,
                 drafts=None, draft_tokens: int = 0, draft_rows: int | None = None,
                 draft_row_cost=ROW_COST["cpu"], draft_chunk_cost=None,
                 snap_rows: int | None = None):
        self.driver, self.adm = driver, admission
        self.sampling = driver.sampling      # rank 0's sampling (server/host_sampling.py)
        self.context, self.prefill_chunk = context, prefill_chunk
        self.token_budget = token_budget or max(prefill_chunk, 64)
        # rounds no stream decodes in: a prompt's chunk (None: prefill_chunk); rounds others
        # decode in: the prefill chunks' attention reads at most (None: no bound)
        self.solo_chunk = max(solo_chunk or prefill_chunk, prefill_chunk)
        if prefill_keys is not None and prefill_keys < 0:
            raise ValueError(f"prefill_keys {prefill_keys}: 0 or more (0: no bound)")
        self.prefill_keys = prefill_keys or None
        self.seed_salt, self.metrics = seed_salt, metrics
        # drafts (server/drafts/): the source (None: off), tokens a stream drafts at most,
        # and the rows a round may hold before drafting backs off (policy.round_drafts)
        self.draft_source, self.draft_tokens = drafts, draft_tokens
        self.draft_row_cost = draft_row_cost     # server/drafts/pace.py
        self.draft_chunk_cost = draft_chunk_cost  # a lone stream's chunk costs (policy.CHUNK_COST)
        # a recurrent family's page rows (its drafts replayed after a refusal and kept off
        # page boundaries: server/round_build.py snap_cap), None: not recurrent
        self.snap_rows = snap_rows
        if drafts is not None and snap_rows and getattr(drafts, "engine_pass", False):
            raise ValueError("MTP drafts on a recurrent family: not supported (use ngram)")
        self.draft_rows = draft_rows if draft_rows is not None else draft_tokens + 1
        if drafts is not None and self.adm.verify_window < draft_tokens + 1:
            raise ValueError(f"drafts of {draft_tokens} tokens need a verify window of "
                             f"{draft_tokens + 1} rows; admission reserves {self.adm.verify_window}")
        self.draft_tokens_done = 0           # tokens drafted, and of them accepted
        self.accepted_tokens_done = 0
        self.inbox: queue.Queue = queue.Queue()
        self.active: dict[str, Active] = {}
        self.sinks: dict[str, tuple] = {}        # req id -> (loop, asyncio.Queue)
        self.waiting: dict[str, GenRequest] = {}
        self.held: dict[str, list] = {}      # choice 0's id -> choices waiting for its prefill
        self.error: str | None = None
        self.error_code: str | None = None   # the API code of self.error: rank_lost, or None
        self.cause: str | None = None        # what stopped the engine loop (self.error's core)
        self.closed: str | None = None       # stop_admitting's message: nothing new is admitted
        self.rounds = 0
        self.prompt_tokens_done = 0          # prompt tokens prefilled, all requests (stats line)
        self.generation_tokens_done = 0      # tokens sampled, all requests
        self._steps = 0                      # steps sent; the idle check runs once per change
        self._checked = -1
        self._stop = threading.Event()
        self._host = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="foldserve-masks")
        self._thread = threading.Thread(target=self._run, name="foldserve-engine", daemon=True)
        # the events' way to the event loops once the engine thread runs (start); before
        # that (tests that drive the rounds themselves) _emit hands them over at once
        self._wake: Wake | None = None

    # ---- front end side (any thread / the event loop) ----
    def start(self):
        self._wake = Wake()
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self.inbox.put(("wake", None))
        self._thread.join(timeout=self.STOP_WAIT_S)
        if self._wake is not None:
            self._wake.stop(self.STOP_WAIT_S / 10)
        self._host.shutdown(wait=False)
        self.driver.close()

    def check(self, prompt_len: int, max_tokens: int) -> None:
        """Raise planner.admission.Refused (code, message, status 400) for what can never fit."""
        self.adm.check(prompt_len, max_tokens)

    async def generate(self, req: GenRequest):
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        if self.error:
            yield TokenEvent(None, finish_reason="error", error=self.error, error_code=503,
                             code=self.error_code)
            return
        req.arrival = req.arrival or time.monotonic()
        self.sinks[req.id] = (loop, q)
        self.inbox.put(("new", req))
        finished = False
        try:
            while True:
                ev = await q.get()
                yield ev
                if ev.finish_reason is not None:
                    finished = True
                    return
        finally:
            if not finished:               # the client left: free its stream by the next round
                self.cancel(req.id)

    def cancel(self, req_id: str) -> None:
        self.inbox.put(("cancel", req_id))

    def stop_admitting(self, message: str) -> None:
        """Shutting down: the waiting requests, and every later one, end now with a 503
        `shutting_down` error (`message`); the running ones go on."""
        self.inbox.put(("close", message))

    def end_running(self, message: str) -> None:
        """Shutting down: end every running request now with a 503 `shutting_down` error."""
        self.inbox.put(("end", message))

    def stats(self) -> dict:
        pool = self.adm.pool
        lost = getattr(self.driver, "failure", None) or self.cause
        return {"ranks": self.driver.ranks, "ranks_ok": self.driver.ok and self.error is None,
                "lost": str(lost) if lost else None,     # what ended the group, once known
                "streams_busy": len(self.active), "streams_total": self.adm.streams,
                "queue": len(self.waiting), "context": self.context, "rounds": self.rounds,
                "pages_total": pool.total, "pages_free": pool.free, "pages_kept": pool.kept,
                "paged": self.adm.paged, "page_rows": self.adm.page_rows, "error": self.error,
                "cache_pages": self.adm.cache.budget,
                "prompt_tokens_done": self.prompt_tokens_done,
                "generation_tokens_done": self.generation_tokens_done,
                "draft_tokens_done": self.draft_tokens_done,
                "accepted_tokens_done": self.accepted_tokens_done}

    # ---- engine thread ----
    def _emit(self, req_id: str, ev: TokenEvent) -> None:
        sink = self.sinks.get(req_id)
        if sink is None:
            return
        loop, q = sink
        if ev.finish_reason is not None:
            self.sinks.pop(req_id, None)
        if self._wake is not None:
            self._wake.put(loop, q.put_nowait, ev)
            return
        try:
            loop.call_soon_threadsafe(q.put_nowait, ev)
        except RuntimeError:               # its event loop is gone
            pass

    def _run(self):
        try:
            while not self._stop.is_set():
                busy = bool(self.active or self.waiting)
                self._drain(block=not busy)
                if self._stop.is_set():
                    break
                self._admit()
                if self.active:
                    self._round()
                elif not self.waiting:
                    if self._checked != self._steps:   # once per change, not every idle tick
                        self.adm.check_integrity()
                        self._checked = self._steps
                    self.driver.check()          # a follower gone while idle is noticed now
        except Exception as e:               # a rank is gone, or a bug: nobody hangs
            # the heartbeat's or watchdog's verdict where there is one: on NCCL the step
            # itself then fails with the communicator's abort, which says less
            cause = getattr(self.driver, "failure", None) or e
            if isinstance(cause, RankError):   # one line; the traceback only at debug
                log.error("engine loop stopped: %s", cause)
                log.debug("engine loop stopped", exc_info=True)
                self.error_code = "rank_lost"
            else:
                log.exception("engine loop stopped")
            self.cause = str(cause)
            self.error = f"the engine stopped: {cause}; restart the ranks"
            self.driver.ok = False
            for rid in list(self.active) + list(self.waiting):
                self._emit(rid, TokenEvent(None, finish_reason="error", error=self.error,
                                           error_code=503, code=self.error_code))
            self.active.clear()
            self.waiting.clear()
            self.held.clear()
            while not self._stop.is_set():   # answer what still arrives, until stop() wakes it
                kind, x = self.inbox.get()
                if kind == "new":
                    self._emit(x.id, TokenEvent(None, finish_reason="error", error=self.error,
                                                error_code=503, code=self.error_code))

    def _drain(self, block: bool):
        try:
            item = self.inbox.get(timeout=self.IDLE_TICK_S) if block else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, x = item
            if kind == "new":
                self._submit(x)
            elif kind == "cancel":
                self._cancel(x)
            elif kind == "close":
                self._close(x)
            elif kind == "end":
                for a in list(self.active.values()):
                    finishing.finish(self, a, "error", x, status=503, code=SHUTTING_DOWN)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _close(self, message: str) -> None:
        self.closed = message
        for rid in list(self.waiting):
            req = self.waiting.pop(rid)
            self._run_all(self.adm.cancel(rid))
            self._refuse(req)
        self.held.clear()

    def _refuse(self, req: GenRequest) -> None:
        self._emit(req.id, TokenEvent(None, finish_reason="error", error=self.closed,
                                      error_code=503, code=SHUTTING_DOWN))

    def _submit(self, req: GenRequest):
        if self.closed is not None:
            self._refuse(req)
            return
        lead = req.follows
        if lead is not None and self._prefilling(lead):
            self.held.setdefault(lead, []).append(req)
            self.waiting[req.id] = req       # answered like any waiting one should all fail
            return
        self._enqueue(req)

    def _prefilling(self, req_id: str) -> bool:
        """Waiting, or running with prompt rows still to write."""
        if req_id in self.waiting:
            return True
        a = self.active.get(req_id)
        return a is not None and a.prefilling

    def _release(self, lead: str) -> None:
        """Choice 0's prompt is written (or it ended): its held choices enter admission."""
        for req in self.held.pop(lead, ()):
            if self.waiting.pop(req.id, None) is not None:
                self._enqueue(req)

    def _enqueue(self, req: GenRequest):
        try:
            self.adm.request(req.id, req.prompt_ids, req.params.max_tokens,
                             resume=req.params.prompt_logprobs is None)
        except Exception as e:
            self._emit(req.id, TokenEvent(None, finish_reason="error", error=str(e),
                                          error_code=getattr(e, "status", 400)))
            return
        self.waiting[req.id] = req

    def _cancel(self, req_id: str):
        if req_id in self.waiting:
            req = self.waiting.pop(req_id)
            if req.follows in self.held and req in self.held[req.follows]:
                self.held[req.follows].remove(req)
            self._release(req_id)
            self._run_all(self.adm.cancel(req_id))
            self._emit(req_id, TokenEvent(None, finish_reason="abort"))
        elif req_id in self.active:
            finishing.finish(self, self.active[req_id], "abort")

    def _admit(self):
        for g in self.adm.admit_ready():
            # listed as waiting until it is active: should anything here raise, the loop's
            # handler still answers it (a request in neither list would hang its client)
            req = self.waiting[g.req_id]
            try:
                st = self.sampling.sampler_state(req.params, req.prompt_ids, self.seed_salt,
                                               grammar=req.grammar, eos_ids=req.eos_ids)
            except Exception as e:           # this request's own settings: end it alone
                log.exception("request %s: sampler", req.id)
                del self.waiting[req.id]
                self._run_all(self.adm.cancel(req.id))
                self._release(req.id)
                self._emit(req.id, TokenEvent(None, finish_reason="error", error_code=500,
                                              error=f"the sampler refused this request: {e}"))
                continue
            a = Active(req, g.stream, tuple(g.page_ids), g.resumed_rows, st,
                       cached=g.resumed_rows, admitted_at=time.monotonic(),
                       drafts=self._drafts_for(req, st))
            self._run_all(g.steps())         # BeginStep (+ CopyStep restoring a kept prefix)
            del self.waiting[req.id]
            self.active[req.id] = a
            if self.metrics:
                self.metrics.admitted(req, a.admitted_at - req.arrival, g.resumed_rows)

    def _drafts_for(self, req: GenRequest, st):
        """The stream's drafts: None with drafting off, for a request that says
        "draft": false, or where the driver cannot draw its verify rows as plain would."""
        if self.draft_source is None or not req.draft or not self.sampling.verifies(st):
            return None
        return Paced(self.draft_source.stream(req.prompt_ids), self.draft_row_cost,
                     self.draft_chunk_cost)

    def _run_all(self, steps):
        for st in steps:
            self.driver.run(st)
            self._steps += 1

    def _round(self):
        rnd = build_round(self.active.values(), budget=self.token_budget, context=self.context,
                          prefill_chunk=self.prefill_chunk, solo_chunk=self.solo_chunk,
                          prefill_keys=self.prefill_keys,
                          drafting=self.draft_source is not None,
                          draft_tokens=self.draft_tokens, draft_rows=self.draft_rows,
                          snap_rows=self.snap_rows)
        # grammar masks for the rows this round samples: on the host while the ranks run it
        # (all at once: llguidance's threads)
        shaped = [a.sampler for a, d in zip(rnd.owners, rnd.samples)
                  if d and a.sampler.constraint is not None]
        masks = self._host.submit(self.sampling.prepare_masks, shaped) if shaped else None
        try:
            logits = self.driver.run(RoundStep(tuple(rnd.chunks)))
        finally:
            if masks is not None:
                masks.exception()            # wait; a failure shows again when sampling
        self.rounds += 1
        self._steps += 1
        fed = sum(len(c.tokens) for c in rnd.chunks)
        self.prompt_tokens_done += sum(len(c.tokens) for c, a in zip(rnd.chunks, rnd.owners)
                                       if a.prefilling)
        if self.metrics is not None and hasattr(self.metrics, "iteration"):
            self.metrics.iteration(fed)
        take_round(self, rnd, logits)
        if getattr(self.draft_source, "engine_pass", False):
            self._after_round(rnd.chunks, rnd.owners)

    def _after_round(self, chunks, owners) -> None:
        """A source that runs on the ranks (MTP, server/drafts/mtp.py): each drafting stream
        still running gets the rows this round made valid (from its chunk's start to its
        rows written, each with the token after it) and, where it drafts next round, as
        many guesses as its pace will ask for then, at the next round's load (its decoding
        streams; none where a stream still prefills: that round drafts nothing).

        The pass waits where it would buy nothing: a stream that will not draft next round
        (the round's decodes alone fill its rows, or its pace finds no draft paying at the
        round's rate and no probe is due) has its chunk deferred (MtpChunk.defer: the ranks
        keep its trunk rows, up to MTP_KEPT a stream); its next pass starts at the first
        kept row, so its MTP rows are those written round by round, and a stream that ends
        first never pays for them. A stream that never drafts ("draft": false) needs no
        MTP rows. Decided from the round's counts and the streams' own records alone
        (deterministic)."""
        live = list(self.active.values())
        dec = sum(not a.prefilling for a in live)
        no_drafts = any(a.prefilling for a in live) or dec >= self.draft_rows
        entries, o = [], 0
        for c, a in zip(chunks, owners):
            src, o = o, o + len(c.tokens)
            if a.req.id not in self.active or a.fed <= c.start or a.drafts is None:
                continue
            new, depth = a.fed - c.start, 0
            if not a.prefilling:
                left = min(a.req.params.max_tokens - len(a.out), self.context - a.length)
                cap = 0 if no_drafts else min(self.draft_tokens, left - 1, self.draft_rows - dec)
                a.drafts.at(a.length)
                depth = a.drafts.wanted(cap, (dec, float(dec)))
            if depth == 0 and a.mtp_kept + new <= self.MTP_KEPT:
                entries.append((c.stream, c.start, a.ids[c.start + 1:a.fed + 1], src, -1,
                                None, len(a.out)))
                a.mtp_kept += new
                continue
            start = c.start - a.mtp_kept
            a.mtp_kept = 0
            entries.append((c.stream, start, a.ids[start + 1:a.fed + 1], src, depth,
                            a.drafts.source, len(a.out)))
        if entries:
            self.draft_source.after_round(self.driver, entries)
            self._steps += 1
