"""Greedy against sampled decoding through the scheduler, side by side in one run: b1 TPOT and
64-concurrent output throughput, the same engine (random bf16 weights at a real shape, made on
the device), the same prompts, greedy and sampled runs alternated. Sampled rows are drawn by
kernels/sample_cuda.py (every row of the round in one launch). No HTTP: the numbers are the
engine thread's (admit, round, sample, emit), as `foldserve serve` runs it. Prints one line a
measurement and a JSON summary with the ratios.

  PYTHONUNBUFFERED=1 python3 bench/sampled_tpot.py [--model dummy:llama3-8b] [--out DIR]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402
from server.planner.admission import Admission  # noqa: E402
from server.ranks.steps import PoolStep  # noqa: E402
from server.requests import GenRequest, SamplingParams  # noqa: E402
from server.scheduler import Scheduler  # noqa: E402
from server.step_driver import LocalDriver  # noqa: E402

MODES = {"greedy": dict(temperature=0.0),
         "sampled": dict(temperature=0.8, top_p=0.95),
         "sampled_k50_p095_pen": dict(temperature=0.8, top_k=50, top_p=0.95,
                                      frequency_penalty=0.3, repetition_penalty=1.1,
                                      logit_bias=((11, -100.0),))}


def run(sched, reqs):
    """-> per request [event times], and the wall time of the whole batch."""
    async def one(req):
        ts = []
        async for ev in sched.generate(req):
            if ev.token_id is not None:
                ts.append(time.perf_counter())
            if ev.error:
                raise RuntimeError(ev.error)
        return ts

    async def all_():
        return await asyncio.gather(*(one(r) for r in reqs))
    t0 = time.perf_counter()
    out = asyncio.run(all_())
    return out, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="dummy:llama3-8b")
    ap.add_argument("--b1-tokens", type=int, default=160)
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--output", type=int, default=128)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--out", default="")
    ap.add_argument("--device", default="cuda", help="cpu: a smoke test of this script only")
    a = ap.parse_args()
    t0 = time.perf_counter()
    eng = open_model(a.model, device=a.device, progress=False).engine
    print(f"model {a.model} ready in {time.perf_counter() - t0:.1f} s", flush=True)
    P, ctx = 16, 1024
    pages = a.streams * ctx // P
    adm = Admission(paged=True, pages=pages, page_rows=P, streams=a.streams, context=ctx)
    eng.apply(PoolStep(True, pages, P, (eng.page_bytes(P),), a.streams, ctx))
    sched = Scheduler(LocalDriver(eng), adm, context=ctx, prefill_chunk=512,
                      token_budget=2048, seed_salt=1).start()
    rng = np.random.default_rng(0)
    V = eng.spec.vocab
    n = [0]

    def reqs(mode, k, prompt, out):
        rs = []
        for i in range(k):
            n[0] += 1
            ids = [int(t) for t in rng.integers(0, V, prompt)]
            rs.append(GenRequest(f"r{n[0]}", ids, SamplingParams(
                max_tokens=out, ignore_eos=True, seed=n[0], **MODES[mode])))
        return rs

    res: dict = {"model": a.model, "vocab": V}
    try:
        for mode in MODES:                                   # warm: graphs, the sampler's compile
            run(sched, reqs(mode, 1, 16, 8))
            run(sched, reqs(mode, a.streams, 16, 4))
        order = ["greedy", "sampled", "sampled_k50_p095_pen"]
        for rep in range(a.reps):
            for mode in (order if rep % 2 == 0 else order[::-1]):
                (ts,), _ = run(sched, reqs(mode, 1, 32, a.b1_tokens))
                tpot = 1e3 * (ts[-1] - ts[0]) / (len(ts) - 1)
                res.setdefault(f"b1_tpot_ms_{mode}", []).append(round(tpot, 3))
                print(f"b1 {mode}: TPOT {tpot:.3f} ms", flush=True)
        for rep in range(a.reps):
            for mode in (order if rep % 2 == 0 else order[::-1]):
                out, wall = run(sched, reqs(mode, a.streams, a.prompt, a.output))
                toks = sum(len(t) for t in out)
                dec = [1e3 * (t[-1] - t[0]) / (len(t) - 1) for t in out]
                res.setdefault(f"c{a.streams}_tok_s_{mode}", []).append(round(toks / wall, 1))
                res.setdefault(f"c{a.streams}_tpot_ms_{mode}", []).append(round(float(np.mean(dec)), 3))
                print(f"{a.streams} concurrent {a.prompt}/{a.output} {mode}: {toks / wall:.1f} "
                      f"tok/s, mean TPOT {np.mean(dec):.3f} ms", flush=True)
    finally:
        sched.stop()
    for key in ("b1_tpot_ms", f"c{a.streams}_tok_s", f"c{a.streams}_tpot_ms"):
        g = float(np.median(res[f"{key}_greedy"]))
        for mode in MODES:
            if mode != "greedy":
                res[f"{key}_ratio_{mode}_over_greedy"] = round(float(np.median(res[f"{key}_{mode}"])) / g, 4)
    print(json.dumps(res), flush=True)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "sampled_tpot.json"), "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
