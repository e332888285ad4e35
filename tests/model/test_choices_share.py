"""n > 1 through the scheduler, on the real engine (dummy:tiny): choices 1.. wait for
choice 0's prompt, resume from its kept pages, and each equals a single request with its
seed on a server that keeps nothing (resumed == fresh); the prompt is prefilled once."""
from __future__ import annotations

import asyncio

import pytest

from server.engine.build import open_model
from server.planner.admission import Admission
from server.ranks.steps import PoolStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver

PR, CTX = 4, 64
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]          # 11 tokens: 2 full pages of 4


@pytest.fixture(scope="module")
def engine():
    return open_model("dummy:tiny", progress=False).engine


def scheduler(eng, paged: bool, cache: int) -> Scheduler:
    if paged:
        adm = Admission(paged=True, pages=64, page_rows=PR, streams=4, context=CTX, cache_pages=cache)
        eng.apply(PoolStep(True, 64, PR, (eng.page_bytes(PR),), 4, CTX))
    else:
        adm = Admission(paged=False, pages=cache, page_rows=PR, streams=4, context=CTX,
                        cache_pages=cache)
        eng.apply(PoolStep(False, cache, PR, (eng.page_bytes(PR),), 4, CTX))
    return Scheduler(LocalDriver(eng), adm, context=CTX, prefill_chunk=8).start()


def params(seed):
    return SamplingParams(max_tokens=6, temperature=1.0, seed=seed, logprobs=2)


async def _run(sched, reqs):
    async def one(r):
        return [(e.token_id, e.logprob, e.top_logprobs, e.finish_reason, e.cached_tokens)
                async for e in sched.generate(r)]
    return await asyncio.gather(*(one(r) for r in reqs))


@pytest.mark.parametrize("paged", [True, False])
def test_choices_share_one_prefill_and_equal_single_requests(engine, paged):
    sched = scheduler(engine, paged, cache=16)
    try:
        reqs = [GenRequest("c-0", list(PROMPT), params(40))]
        reqs += [GenRequest(f"c-{i}", list(PROMPT), params(40 + i), follows="c-0") for i in (1, 2)]
        choices = asyncio.run(_run(sched, reqs))
        prefilled = sched.prompt_tokens_done
        sched.adm.check_integrity()
        assert sched.adm.pool.free + sched.adm.pool.kept == sched.adm.pool.total
        assert not sched.held and not sched.waiting
    finally:
        sched.stop()
    # choice 0 prefilled all 11; each other choice only past the 2 kept pages: 3 tokens
    assert prefilled == len(PROMPT) + 2 * (len(PROMPT) - 2 * PR), prefilled
    assert [c[-1][4] for c in choices] == [0, 2 * PR, 2 * PR]        # cached tokens
    singles = []
    for seed in (40, 41, 42):                       # each alone on a server that keeps nothing
        cold = scheduler(engine, paged, cache=0)
        try:
            singles += asyncio.run(_run(cold, [GenRequest("s", list(PROMPT), params(seed))]))
            assert cold.prompt_tokens_done == len(PROMPT)
        finally:
            cold.stop()
    strip = lambda evs: [e[:4] for e in evs]
    assert [strip(c) for c in choices] == [strip(s) for s in singles]
    assert len({tuple(e[0] for e in s) for s in singles}) > 1          # the seeds differ


def test_a_cancelled_first_choice_lets_the_others_run(engine):
    """Choice 0 cancelled before its prefill: the held choices are released (prefilling
    for themselves), none hangs, every page comes back."""
    sched = scheduler(engine, True, cache=16)

    async def go():
        reqs = [GenRequest("c-0", list(PROMPT), params(1))]
        reqs += [GenRequest(f"c-{i}", list(PROMPT), params(1 + i), follows="c-0") for i in (1, 2)]
        gens = [sched.generate(r) for r in reqs]
        first = asyncio.ensure_future(gens[0].__anext__())
        others = [asyncio.ensure_future(_drain(g)) for g in gens[1:]]
        await asyncio.sleep(0)
        sched.cancel("c-0")
        ev = await first
        await gens[0].aclose()
        return ev, await asyncio.gather(*others)

    async def _drain(g):
        return [e async for e in g]

    try:
        ev, rest = asyncio.run(go())
        sched.adm.check_integrity()
        assert not sched.held and not sched.active and not sched.waiting
    finally:
        sched.stop()
    assert all(r[-1].finish_reason == "length" and len(r) == 7 for r in rest)
    assert sched.adm.pool.free + sched.adm.pool.kept == sched.adm.pool.total
