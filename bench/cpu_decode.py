"""Decode tokens/s of the default model on the CPU at batch 1 and 8, against the memory floor.

The floor of a decode step is reading every weight once: weight bytes / the copy bandwidth
measured in the same run (a large numpy copy, bytes read + written). Prints the table and
one JSON line. Usage: python3 bench/cpu_decode.py [--model M] [--steps N] [--batches 1,8]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402


def copy_bandwidth(nbytes=1 << 30, reps=5) -> float:
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def weight_bytes(engine) -> int:
    w = engine.weights
    n = w.embed.nbytes * 0 + w.lm_head.nbytes + w.norm.nbytes   # embedding rows read are few
    for L in w.layers:
        for a in (L.attn_norm, L.wqkv, L.bqkv, L.q_norm, L.k_norm, L.wo, L.mlp_norm, L.wgu, L.wdown):
            n += 0 if a is None else a.nbytes
    return n


def run_batch(engine, batch, prompt_len, steps, page_rows=16):
    per = -(-(prompt_len + steps + 1) // page_rows)
    engine.apply(PoolStep(True, per * batch, page_rows, (engine.page_bytes(page_rows),), batch,
                          prompt_len + steps + 1))
    rng = np.random.default_rng(0)
    for s in range(batch):
        engine.apply(BeginStep(s, tuple(range(s * per, (s + 1) * per))))
        prompt = tuple(int(t) for t in rng.integers(100, 20000, prompt_len))
        engine.apply(RoundStep((Chunk(s, 0, prompt, True),)))
    toks = [int(t) for t in rng.integers(100, 20000, batch)]
    times = []
    for i in range(steps):
        t = time.perf_counter()
        lg = engine.apply(RoundStep(tuple(Chunk(s, prompt_len + i, (toks[s],), True) for s in range(batch))))
        times.append(time.perf_counter() - t)
        toks = [int(np.argmax(r)) for r in lg]
    times = sorted(times[2:])
    med = times[len(times) // 2]
    return med, batch / med


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--batches", default="1,8")
    a = ap.parse_args()
    opened = open_model(a.model, progress=False)
    bw = copy_bandwidth()
    wb = weight_bytes(opened.engine)
    floor = wb / bw
    rows = []
    for b in [int(x) for x in a.batches.split(",")]:
        med, tps = run_batch(opened.engine, b, a.prompt_len, a.steps)
        rows.append({"batch": b, "step_ms": med * 1e3, "tokens_per_s": tps,
                     "floor_ms": floor * 1e3, "step_over_floor": med / floor})
    head = {"model": opened.name, "weights_fp32_bytes": wb, "copy_bandwidth_GBps": bw / 1e9,
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip()}
    print(f"model {head['model']}: {wb / 1e6:.0f} MB of fp32 weights read per decode step; "
          f"copy bandwidth {bw / 1e9:.1f} GB/s -> floor {floor * 1e3:.1f} ms a step")
    print(f"{'batch':>5} {'ms/step':>9} {'tokens/s':>9} {'x floor':>8}")
    for r in rows:
        print(f"{r['batch']:>5} {r['step_ms']:>9.1f} {r['tokens_per_s']:>9.1f} {r['step_over_floor']:>8.2f}")
    print(json.dumps({**head, "rows": rows}))


if __name__ == "__main__":
    main()
