"""drafted == plain, byte for byte: every event a client sees (token ids, logprobs, top
logprobs, finish reasons) with n-gram drafts equals the reply without, for greedy and
seeded sampling, penalties, logit_bias, min_tokens and stop tokens, solo and among
concurrent streams, on pages and on windows (dummy:tiny; a repetitive prompt, so n-grams
hit and are both accepted and rejected)."""
from __future__ import annotations

import pytest

from server.engine.build import open_model
from server.ranks.steps import EVERY_ROW, RoundStep
from server.requests import SamplingParams as P
from server.step_driver import LocalDriver

from drafts_run import serve

REP = [5, 6, 7, 8, 9, 10, 11, 12] * 4 + [5, 6, 7]


FAMILIES = ["tiny", "tiny-qwen3moe", "tiny-glm4moe", "tiny-gptoss", "tiny-deepseek3"]  # llama, MoE, MLA
_ENGINES: dict = {}


def engine(name: str):
    if name not in _ENGINES:
        _ENGINES[name] = open_model(f"dummy:{name}", progress=False).engine
    return _ENGINES[name]


@pytest.fixture(scope="module")
def tiny():
    return engine("tiny")


def cases():
    return [
        (REP, P(max_tokens=48, temperature=0.0)),
        (REP[3:], P(max_tokens=40, temperature=0.0, logprobs=3)),
        (REP[1:], P(max_tokens=40, temperature=0.7, seed=7)),
        (REP[2:], P(max_tokens=40, temperature=1.0, top_k=5, top_p=0.9, seed=11, logprobs=2)),
        (REP[4:], P(max_tokens=36, temperature=0.0, repetition_penalty=1.2,
                    frequency_penalty=0.3, presence_penalty=0.2)),
        (REP[5:], P(max_tokens=30, temperature=0.0, logit_bias=((12, 3.0), (9, -2.0)),
                    min_tokens=6, stop_token_ids=(10,))),
    ]


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("together", [True, False], ids=["concurrent", "solo"])
@pytest.mark.parametrize("name", FAMILIES)
def test_drafted_equals_plain(name, paged, together):
    eng = engine(name)
    plain, _ = serve(eng, cases(), draft=False, paged=paged, together=together, streams=6)
    drafted, s = serve(eng, cases(), draft=True, paged=paged, together=together, streams=6)
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"case {i}: drafted {d!r} != plain {p!r}"
    # both ways of a verify walk ran: drafts taken and drafts refused
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_resumed_drafted_equals_plain(tiny, paged):
    """Each request twice, one after another, with a prompt cache: the second resumes from
    the first's kept prompt pages (cached tokens > 0) and drafts from there; every reply,
    fresh and resumed, drafted == plain."""
    reqs = [r for r in cases() for _ in range(2)]
    got = {}
    for draft in (False, True):
        cached = []
        got[draft] = serve(tiny, reqs, draft=draft, paged=paged, together=False, streams=2,
                           cache_pages=64, cached=cached)
        assert all(c == 0 for c in cached[0::2]) and all(c > 0 for c in cached[1::2]), cached
    (plain, _), (drafted, s) = got[False], got[True]
    for i, (p, d) in enumerate(zip(plain, drafted)):
        assert d == p, f"request {i}: drafted {d!r} != plain {p!r}"
    assert 0 < s.accepted_tokens_done < s.draft_tokens_done, s.stats()


def test_a_request_that_says_draft_false_is_never_drafted(tiny):
    (p,), _ = serve(tiny, cases()[:1], draft=False)
    (d,), s = serve(tiny, [(*cases()[0], {"draft": False})], draft=True)
    assert d == p and s.draft_tokens_done == 0


class Recording(LocalDriver):
    def __init__(self, engine):
        super().__init__(engine)
        self.rounds = []

    def run(self, step):
        if isinstance(step, RoundStep):
            self.rounds.append(step)
        return super().run(step)


def test_drafting_backs_off_as_the_round_fills(tiny):
    """Sixteen decoding streams (greedy and seeded-sampled, their replies drafted == plain)
    fill the round: no verify chunk; a round that prefills drafts nothing; no round holds
    more rows of decodes and drafts than one verify window (or its decodes alone)."""
    rec = Recording(tiny)
    reqs = [(REP[i % 8:], P(max_tokens=24, temperature=0.0) if i % 2 else
             P(max_tokens=24 - i // 2, temperature=0.9, seed=i, logprobs=1)) for i in range(16)]
    out, s = serve(tiny, reqs, draft=True, streams=16, driver=rec, chunk=64)
    plain, _ = serve(tiny, reqs, draft=False, streams=16, chunk=64)
    assert out == plain
    verifies = 0
    for st in rec.rounds:
        drafts = [c for c in st.chunks if c.logits == EVERY_ROW]
        rows = sum(len(c.tokens) for c in st.chunks)
        if drafts:
            verifies += 1
            assert all(c.logits for c in st.chunks)          # no prefill chunk beside them
            assert rows <= 9, st
        if len(st.chunks) == 16:
            assert not drafts, st
    assert verifies > 0                  # the streams ending one by one left room to draft


def test_drafts_stay_within_the_rows_plain_decoding_writes(tiny):
    """A verify chunk never writes past the last row plain decoding writes (prompt +
    max_tokens - 1 rows), however far the n-grams reach: within the table admission
    reserved, and no work past the reply's end."""
    rec = Recording(tiny)
    prompt, params = REP, P(max_tokens=21, temperature=0.0, ignore_eos=True)
    out, s = serve(tiny, [(prompt, params)], draft=True, driver=rec)
    assert s.draft_tokens_done > 0
    last = max(c.start + len(c.tokens) - 1 for st in rec.rounds for c in st.chunks)
    assert last == len(prompt) + params.max_tokens - 2
    assert len(out[0]) == params.max_tokens + 1 and out[0][-1][3] == "length"
