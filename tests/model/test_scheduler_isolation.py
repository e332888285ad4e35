"""One request's failure on the host (its sampler) ends that request alone: the others
finish, the engine keeps serving, and every page comes back."""
from __future__ import annotations

import asyncio

from server.step_driver import LocalDriver
from server.engine.build import open_model
from server.engine import sampler as sampler_mod
from server.planner.admission import Admission
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler


def test_a_failing_sampler_ends_only_its_request(monkeypatch):
    eng = open_model("dummy:tiny", progress=False).engine
    adm = Admission(paged=True, pages=32, page_rows=4, streams=4, context=64)
    sched = Scheduler(LocalDriver(eng), adm, context=64, prefill_chunk=8)
    from server.ranks.steps import PoolStep
    eng.apply(PoolStep(True, 32, 4, (eng.page_bytes(4),), 4, 64))
    real = sampler_mod.sample

    def broken(row, st):
        if st.params.temperature == 0.5:
            raise RuntimeError("planted")
        return real(row, st)

    monkeypatch.setattr("server.host_sampling.sample", broken)
    sched.start()

    async def one(rid, temp):
        req = GenRequest(rid, [5, 6, 7, 8, 9], SamplingParams(max_tokens=6, temperature=temp, seed=1))
        return [ev async for ev in sched.generate(req)]

    async def both():
        return await asyncio.gather(one("bad", 0.5), one("good", 0.8), one("greedy", 0.0))

    try:
        bad, good, greedy = asyncio.run(both())
    finally:
        sched.stop()
    assert bad[-1].finish_reason == "error" and "planted" in bad[-1].error
    assert good[-1].finish_reason == "length" and len(good) == 7
    assert greedy[-1].finish_reason == "length" and len(greedy) == 7
    assert adm.pool.free == adm.pool.total
    adm.check_integrity()


def test_nan_logits_end_only_their_request(monkeypatch):
    """A row of logits holding NaN (a numerical fault) ends that request with an error
    that says so; the round's other requests finish."""
    eng = open_model("dummy:tiny", progress=False).engine
    adm = Admission(paged=True, pages=32, page_rows=4, streams=4, context=64)
    sched = Scheduler(LocalDriver(eng), adm, context=64, prefill_chunk=8)
    from server.ranks.steps import PoolStep
    eng.apply(PoolStep(True, 32, 4, (eng.page_bytes(4),), 4, 64))
    real = sampler_mod.sample

    def poisoned(row, st):
        if st.params.temperature == 0.5:
            row = row.copy()
            row[3] = float("nan")
        return real(row, st)

    monkeypatch.setattr("server.host_sampling.sample", poisoned)   # rank 0 samples through its driver
    sched.start()

    async def one(rid, temp):
        req = GenRequest(rid, [5, 6, 7, 8, 9], SamplingParams(max_tokens=6, temperature=temp, seed=1,
                                                               repetition_penalty=1.1))
        return [ev async for ev in sched.generate(req)]

    async def both():
        return await asyncio.gather(one("nan", 0.5), one("good", 0.8))

    try:
        bad, good = asyncio.run(both())
    finally:
        sched.stop()
    assert bad[-1].finish_reason == "error" and "NaN" in bad[-1].error
    assert good[-1].finish_reason == "length" and len(good) == 7
    assert adm.pool.free == adm.pool.total
