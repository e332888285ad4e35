"""drafted == plain on the recurrent families (Gated DeltaNet: tiny-qwen3next; Kimi Delta
Attention: tiny-kimilinear), byte for byte (ids, logprobs, top logprobs, finish reasons):
a refused draft's rows moved the stream's recurrent state past its last accepted token, so
the engine keeps the state from before each verify chunk and the next chunk replays the
accepted rows from there (Engine._roll_back, server/round_build.py). Greedy, seeded,
penalties, logit_bias + stop tokens; solo and concurrent; pages and windows; fresh and
resumed from the prompt cache's snapshots."""
from __future__ import annotations

import numpy as np
import pytest

from server.engine.build import open_model
from server.ranks.steps import EndStep, RoundStep
from server.round_build import snap_cap
from server.step_driver import LocalDriver

from drafts_run import serve
from test_drafts_exact import cases

FAMILIES = ["tiny-qwen3next", "tiny-kimilinear"]
PR = 4                                   # drafts_run's page rows
_ENGINES: dict = {}


def engine(name: str):
    if name not in _ENGINES:
        _ENGINES[name] = open_model(f"dummy:{name}", progress=False).engine
    return _ENGINES[name]


class Oracle:
    """A draft source that knows each request's plain reply (by its prompt) and proposes it
    with one token spoiled, at a depth that moves with the reply's length: drafts taken
    0 .. k deep, so every verify walk length (and every rollback depth) occurs; past a
    reply that a stop token ends, drafts go on (refused: their rows run, never kept)."""
    name = "oracle"

    def __init__(self, replies: dict):
        self.replies = replies

    def stream(self, prompt_ids):
        return OracleDrafts(self.replies[tuple(prompt_ids)])


class OracleDrafts:
    def __init__(self, reply):
        self.reply = reply

    def propose(self, out, k):
        n = len(out)
        d = list(self.reply[n:n + k])
        d += [7] * (k - len(d))                           # past a stop token: never taken
        j = n % (k + 1)
        if j < len(d):
            d[j] = (d[j] + 1) % 512                       # tiny vocabularies: 512
        return tuple(d)

    def verified(self, proposed, accepted):
        pass


def oracle(plain, reqs):
    return Oracle({tuple(r[0]): [t for t, *_ in evs if t is not None]
                   for r, evs in zip(reqs, plain)})


class Recording(LocalDriver):
    """Keeps every RoundStep, and each stream's state bytes as it ends (by its position)."""

    def __init__(self, engine):
        super().__init__(engine)
        self.rounds, self.ended = [], []

    def run(self, step):
        if isinstance(step, RoundStep):
            self.rounds.append(step)
        if isinstance(step, EndStep) and self.engine.fixed_at.get(step.stream) is not None:
            self.ended.append((self.engine.fixed_at[step.stream], b"".join(
                np.ascontiguousarray(a[:, step.stream]).tobytes() for a in self.engine.kv.fixed)))
        return super().run(step)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("together", [True, False], ids=["concurrent", "solo"])
@pytest.mark.parametrize("name", FAMILIES)
def test_recurrent_drafted_equals_plain(name, paged, together):
    eng = engine(name)
    plain, _ = serve(eng, cases(), draft=False, paged=paged, together=together, streams=6,
                     snap_rows=PR)
    rec = Recording(eng)
    drafted, s = serve(eng, cases(), draft=True, paged=paged, together=together, streams=6,
                       snap_rows=PR, driver=rec, source=oracle(plain, cases()))
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"case {i}: drafted {d!r} != plain {p!r}"
    # drafts both taken and refused, and refused ones replayed: a chunk that starts before
    # the rows its stream had written when the round before ended
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()
    fed, replays = {}, 0
    for st in rec.rounds:
        for c in st.chunks:
            if c.stream in fed and c.start < fed[c.stream]:
                replays += 1
            fed[c.stream] = c.start + len(c.tokens)
    assert replays > 0


def test_recurrent_state_at_the_end_equals_plain():
    """Every stream's recurrent state as it ends (its position and bytes) with drafts equals
    the state plain decoding leaves: the rollback leaves no trace of a refused draft."""
    eng = engine("tiny-qwen3next")
    got, plain = {}, None
    for draft in (False, True):
        rec = Recording(eng)
        out, _ = serve(eng, cases(), draft=draft, together=False, streams=6, snap_rows=PR,
                       driver=rec, source=oracle(plain, cases()) if draft else "ngram")
        plain = plain or out
        got[draft] = rec.ended
    assert len(got[True]) == len(cases())
    assert got[True] == got[False]


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_recurrent_resumed_drafted_equals_plain(paged):
    """Each request, then its next turn (its prompt + its reply + more words), one after
    another with a prompt cache: the next turn resumes from the kept pages and the recurrent
    state's snapshot at their last page boundary; drafted == plain for both turns (a
    page-boundary snapshot never stands on a draft that may be refused: snap_cap)."""
    eng = engine("tiny-qwen3next")
    first, _ = serve(eng, cases(), draft=False, together=False, streams=2)
    reqs = []
    for (prompt, params), evs in zip(cases(), first):
        reqs += [(prompt, params),
                 (list(prompt) + [t for t, *_ in evs if t is not None] + [300, 301, 302], params)]
    got, slots = {}, {}
    for draft in (False, True):
        cached = []
        got[draft] = serve(eng, reqs, draft=draft, paged=paged, together=False, streams=2,
                           context=512, cache_pages=128, cached=cached, snap_rows=PR,
                           snap_slots=8, poison=True,
                           source=oracle(got[False][0], reqs) if draft else "ngram")
        assert all(c > 0 for c in cached[1::2]), cached
        slots[draft] = [np.ascontiguousarray(a).tobytes() for a in eng.kv.snaps]
    (plain, _), (drafted, s) = got[False], got[True]
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"request {i}: drafted {d!r} != plain {p!r}"
    # every snapshot slot's bytes as plain decoding left them: none stands on a draft
    assert slots[True] == slots[False]
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()


def test_no_verify_chunk_drafts_across_a_page_boundary(monkeypatch):
    """A verify chunk's drafts stop before a page boundary (a snapshot there would stand on
    them): no boundary b with fed + 2 <= b <= fed + k (fed: the stream's valid rows, the
    chunk's drafts at fed + 1 .. fed + k)."""
    assert [snap_cap(f, 4) for f in range(8)] == [3, 2, 1, 4, 3, 2, 1, 4]
    import server.scheduler as S
    built, orig = [], S.build_round

    def build(*a, **k):
        rnd = orig(*a, **k)
        built.extend((c, d) for c, d in zip(rnd.chunks, rnd.drafted) if d)
        return rnd
    monkeypatch.setattr(S, "build_round", build)
    plain, _ = serve(engine("tiny-qwen3next"), cases(), draft=False, streams=6, snap_rows=PR)
    serve(engine("tiny-qwen3next"), cases(), draft=True, streams=6, snap_rows=PR,
          source=oracle(plain, cases()))
    assert built
    for c, d in built:
        fed = c.start + len(c.tokens) - 1 - len(d)
        assert not [b for b in range(fed + 2, fed + len(d) + 1) if b % PR == 0], (c, d)
