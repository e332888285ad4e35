"""On the GPU: prompt_logprobs from every prompt row's logits (Chunk.logits = EVERY_ROW)
equal those of the engine's last-row logits of each prefix alone, bit for bit, whatever the
chunking (rows through the streaming, 17..64-row and TMA GEMM paths) and with other
streams in the rounds; SmolLM2's shape with dummy weights (flat logits: any difference in
a row shows)."""
from __future__ import annotations

import asyncio

import numpy as np
import pytest

from server.engine.build import open_model
from server.engine.prompt_logprobs import prompt_logprobs
from server.planner.admission import Admission
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver

PR, CTX, K = 16, 160, 5
PROMPT = [(i * 7919 + 13) % 49000 + 10 for i in range(100)]


@pytest.fixture(scope="module")
def engine():
    return open_model("dummy:smollm2-135m", device="cuda", progress=False).engine


def pool(eng):
    eng.apply(PoolStep(True, 64, PR, (eng.page_bytes(PR),), 4, CTX))


def reference(eng) -> list:
    out = []
    for p in range(len(PROMPT) - 1):
        pool(eng)
        pages = tuple(range(50, 50 + (p + 1 + PR - 1) // PR))
        eng.apply(BeginStep(3, pages))
        row = eng.apply(RoundStep((Chunk(3, 0, tuple(PROMPT[:p + 1]), True),)))[0]
        eng.apply(EndStep(3))
        out.append(prompt_logprobs(np.asarray(row)[None, :], 0, [PROMPT[p + 1]], K)[0])
    return out


def run(eng, reqs, chunk):
    adm = Admission(paged=True, pages=48, page_rows=PR, streams=3, context=CTX, cache_pages=0)
    pool(eng)
    sched = Scheduler(LocalDriver(eng), adm, context=CTX, prefill_chunk=chunk,
                      token_budget=256).start()

    async def one(r):
        return [e async for e in sched.generate(r)]

    async def go():
        return await asyncio.gather(*(one(r) for r in reqs))
    try:
        return asyncio.run(go())
    finally:
        sched.stop()


def test_prompt_logprobs_equal_each_prefix_alone_gpu(engine):
    ref = reference(engine)
    lp = lambda: GenRequest("p", list(PROMPT), SamplingParams(max_tokens=2, temperature=0,
                                                              prompt_logprobs=K))
    for chunk in (7, 40, 100):
        (evs,) = run(engine, [lp()], chunk)
        assert list(evs[0].prompt_logprobs) == ref, chunk
    other = GenRequest("o", PROMPT[:30], SamplingParams(max_tokens=8, temperature=0.8, seed=1))
    evs, _ = run(engine, [lp(), other], 64)
    assert list(evs[0].prompt_logprobs) == ref
