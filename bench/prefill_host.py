"""Where a prefill's wall time goes besides the GPU's ops: one llama3-8b-shaped prompt (random
weights), timed three ways in one run: device events around Model.forward (as gpu_bench), the
host's time to prepare the round (Model.rows) and to issue the whole forward without waiting,
and cProfile's top host functions of one forward.

  PYTHONUNBUFFERED=1 python3 bench/prefill_host.py [--tokens 2048]
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import cuda_ms  # noqa: E402
from bench.fixtures import model_of, store  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    a = ap.parse_args()
    spec, n, P = SHAPES["llama3-8b"], a.tokens, 16
    model = model_of(spec)
    kv = store(spec, n, P, fill=False)
    ids = tuple(int(t) for t in np.random.default_rng(1).integers(0, spec.vocab, n))
    chunks = [(tuple(range(n // P)), P, 0, ids, True)]
    fwd = lambda: model.forward(chunks, kv)
    print(f"forward, device events: {cuda_ms(fwd, reps=5, warm=2):.2f} ms")
    sync = cp.cuda.Device().synchronize
    ts = []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        model.rows(chunks)
        sync()
        ts.append(time.perf_counter() - t0)
    print(f"Model.rows (host, then synced): {np.median(ts) * 1e3:.2f} ms")
    issue, total = [], []
    for _ in range(5):
        sync()
        t0 = time.perf_counter()
        fwd()
        t1 = time.perf_counter()
        sync()
        issue.append(t1 - t0)
        total.append(time.perf_counter() - t0)
    print(f"forward: host returns after {np.median(issue) * 1e3:.2f} ms, done after {np.median(total) * 1e3:.2f} ms")
    sync()
    pr = cProfile.Profile()
    pr.enable()
    fwd()
    sync()
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)


if __name__ == "__main__":
    main()
