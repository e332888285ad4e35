"""prompt_logprobs on the real engine (dummy:tiny, CPU): every prompt token's logprob, rank
and top-k equal those computed from the engine's own logits of a request whose prompt ends
just before it (byte-equal rows), whatever the chunking and whatever else shares the
rounds; a warm prompt cache is not used by such a request."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from server.engine.build import open_model
from server.engine.prompt_logprobs import prompt_logprobs, top_ids
from server.planner.admission import Admission
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, EndStep, PoolStep, RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver

PR, CTX = 4, 64
PROMPT = [3, 17, 9, 41, 5, 5, 23, 8, 30, 2, 11, 19, 7]
K = 4


@pytest.fixture(scope="module")
def engine():
    return open_model("dummy:tiny", progress=False).engine


def prefix_logits(eng, ids) -> np.ndarray:
    """The engine's last-row logits of a fresh stream whose prompt is ids (stream 3, pages
    40..)."""
    eng.apply(PoolStep(True, 64, PR, (eng.page_bytes(PR),), 4, CTX))
    pages = tuple(range(40, 40 + (len(ids) + PR - 1) // PR))
    eng.apply(BeginStep(3, pages))
    out = np.asarray(eng.apply(RoundStep((Chunk(3, 0, tuple(ids), True),))))[0].copy()
    eng.apply(EndStep(3))
    return out


def reference(eng) -> list:
    ref = []
    for p in range(len(PROMPT) - 1):
        row = prefix_logits(eng, PROMPT[:p + 1])
        x = row.astype(np.float64)
        ls64 = x - (x.max() + np.log(np.exp(x - x.max()).sum()))    # independent, float64
        ref.append((row, ls64, PROMPT[p + 1]))
    return ref


def run(eng, reqs, *, chunk=8, cache=16, warm=None):
    adm = Admission(paged=True, pages=40, page_rows=PR, streams=3, context=CTX, cache_pages=cache)
    eng.apply(PoolStep(True, 64, PR, (eng.page_bytes(PR),), 4, CTX))
    sched = Scheduler(LocalDriver(eng), adm, context=CTX, prefill_chunk=chunk).start()

    async def one(r):
        return [e async for e in sched.generate(r)]

    async def go():
        if warm is not None:
            await one(warm)
        return await asyncio.gather(*(one(r) for r in reqs))
    try:
        return asyncio.run(go()), sched
    finally:
        sched.stop()


def lp_request(rid="p", seed=1, k=K):
    return GenRequest(rid, list(PROMPT), SamplingParams(max_tokens=3, temperature=1.0, seed=seed,
                                                        prompt_logprobs=k))


def check_against_reference(entries, ref):
    assert len(entries) == len(PROMPT) - 1
    for (tid, lp, rank, top), (row, ls64, target) in zip(entries, ref):
        assert tid == target
        assert abs(lp - ls64[target]) < 1e-5
        assert rank == 1 + int(np.count_nonzero(ls64 > ls64[target] + 1e-6)) or \
            rank == int(np.count_nonzero(row >= row[target]))        # logits' order is the logprobs'
        full = np.argsort(-row, kind="stable")[:K]                       # the sampler's order
        assert [t for t, _ in top] == full.tolist()
        assert all(abs(v - ls64[t]) < 1e-5 for t, v in top)


def test_prompt_logprobs_equal_the_engines_prefix_logits(engine):
    ref = reference(engine)
    base = None
    for chunk in (3, 8, 64):                      # one chunk, or several of them
        (evs,), _ = run(engine, [lp_request()], chunk=chunk)
        entries = evs[0].prompt_logprobs
        check_against_reference(entries, ref)
        base = base or entries
        assert entries == base                    # chunking changes no byte
        assert all(e.prompt_logprobs is None for e in evs[1:])
    # the arithmetic from the reference rows themselves gives the same floats, exactly
    again = [prompt_logprobs(r[None, :], 0, [t], K)[0] for r, _, t in ref]
    assert again == list(base)


def test_prompt_logprobs_solo_equals_concurrent_and_skip_a_warm_cache(engine):
    (solo,), _ = run(engine, [lp_request()])
    others = [GenRequest(f"o{i}", PROMPT[:5 + i] + [1, 2], SamplingParams(max_tokens=4, seed=i))
              for i in range(2)]
    (busy, *_), _ = run(engine, [lp_request()] + others, chunk=5)
    assert busy[0].prompt_logprobs == solo[0].prompt_logprobs
    assert [e.token_id for e in busy] == [e.token_id for e in solo]
    warm = GenRequest("w", list(PROMPT) + [4, 4, 4], SamplingParams(max_tokens=2))
    (cached,), sched = run(engine, [lp_request()], warm=warm)
    assert sched.adm.cache.pages                   # the cache held the prompt's pages
    assert cached[0].cached_tokens == 0             # ...and the request prefilled them anyway
    assert cached[0].prompt_logprobs == solo[0].prompt_logprobs


def test_a_one_token_prompt_has_no_prompt_logprobs_and_k0_no_alternatives(engine):
    r = GenRequest("one", [7], SamplingParams(max_tokens=2, prompt_logprobs=2))
    (evs,), _ = run(engine, [r])
    assert evs[0].prompt_logprobs == ()
    (evs,), _ = run(engine, [lp_request(k=0)])
    assert all(top == () for *_, top in evs[0].prompt_logprobs)


def test_top_ids_is_the_stable_argsort_prefix():
    rng = np.random.default_rng(0)
    for _ in range(200):
        x = rng.integers(0, 6, size=rng.integers(1, 40)).astype(np.float32)   # many ties
        for k in (0, 1, 3, 7, 50):
            assert top_ids(x, k).tolist() == np.argsort(-x, kind="stable")[:k].tolist()


def test_every_row_travels_in_the_packed_step():
    from server.ranks.steps import pack, unpack
    st = RoundStep((Chunk(1, 0, (5, 6), EVERY_ROW), Chunk(2, 4, (7,), True), Chunk(0, 0, (1, 2), False)))
    back = unpack(pack(st))
    assert back == st and [c.logits for c in back.chunks] == [EVERY_ROW, True, False]
