"""The scheduler's half of a shutdown (server/api/drain.py): stop_admitting ends every
waiting request, and every later one, with a 503 shutting_down while the running ones go
on; end_running ends those with the same error; every page comes back."""
from __future__ import annotations

import asyncio
import time

from server.engine.build import open_model
from server.planner.admission import Admission
from server.ranks.steps import PoolStep, RoundStep
from server.requests import SHUTTING_DOWN, GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver


class SlowDriver(LocalDriver):
    """dummy:tiny with rounds of at least 20 ms, so a request of 200 tokens runs 4 s or more."""

    def run(self, step):
        if isinstance(step, RoundStep):
            time.sleep(0.02)
        return super().run(step)


def test_stop_admitting_then_end_running():
    eng = open_model("dummy:tiny", progress=False).engine
    adm = Admission(paged=True, pages=128, page_rows=4, streams=2, context=256)
    eng.apply(PoolStep(True, 128, 4, (eng.page_bytes(4),), 2, 256))
    sched = Scheduler(SlowDriver(eng), adm, context=256,
                      prefill_chunk=8).start()

    def req(rid):
        return GenRequest(rid, [5, 6, 7], SamplingParams(max_tokens=200, temperature=0,
                                                         ignore_eos=True))

    async def run(rid, out):
        async for ev in sched.generate(req(rid)):
            out.setdefault(rid, []).append((time.monotonic(), ev))

    async def main():
        out: dict = {}
        tasks = [asyncio.ensure_future(run(r, out)) for r in ("a", "b", "waits")]
        while len(out.get("a", ())) < 5 or len(out.get("b", ())) < 5:
            await asyncio.sleep(0.01)
        assert sched.stats()["queue"] == 1         # two streams: the third waits
        t0 = time.monotonic()
        sched.stop_admitting("closed for the test")
        late = asyncio.ensure_future(run("late", out))
        await asyncio.wait_for(late, 2)
        while "waits" not in out or out["waits"][-1][1].finish_reason is None:
            await asyncio.sleep(0.01)
        running = (len(out["a"]), len(out["b"]))
        await asyncio.sleep(0.2)
        assert len(out["a"]) > running[0] and len(out["b"]) > running[1], "the running stopped"
        sched.end_running("ended for the test")
        await asyncio.wait_for(asyncio.gather(*tasks), 5)
        return out, t0

    try:
        out, t0 = asyncio.run(main())
    finally:
        sched.stop()
    for rid, message in (("waits", "closed for the test"), ("late", "closed for the test"),
                         ("a", "ended for the test"), ("b", "ended for the test")):
        at, last = out[rid][-1]
        assert (last.finish_reason, last.error, last.error_code, last.code) == (
            "error", message, 503, SHUTTING_DOWN), (rid, last)
    assert [ev.token_id for _, ev in out["waits"]] == [None]     # it never ran
    assert out["waits"][-1][0] - t0 < 0.5                         # refused at once
    assert all(ev.token_id is not None for _, ev in out["a"][:-1]) and len(out["a"]) < 200
    assert adm.pool.free == adm.pool.total
    adm.check_integrity()
