"""One stream's chunk of 1 / 4 / 8 rows at 40 keys through the engine (every row's logits):
the whole round (engine.apply) against the fused forward inside it (Fused.run, timed by a
wrapper), rounds of one size in a row, at the given thread count; medians in ms, then the
threading layer numba chose and a cProfile of the 8-row round's Python side.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/around.py [--reps 9] [--threads 2]
"""
import argparse
import cProfile
import os
import pstats
import statistics
import time

import kernels
kernels.init()
import numba  # noqa: E402
from kernels import forward_cpu  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=9)
ap.add_argument("--threads", type=int, default=2)
a = ap.parse_args()
numba.set_num_threads(a.threads)
inner = []
_run = forward_cpu.Fused.run


def timed(self, *args):
    t0 = time.perf_counter()
    out = _run(self, *args)
    inner.append(time.perf_counter() - t0)
    return out


forward_cpu.Fused.run = timed
eng = open_model(None, progress=False).engine
eng.apply(PoolStep(True, 64, 16, (eng.page_bytes(16),), 1, 512))
eng.apply(BeginStep(0, tuple(range(8))))
ids = list(range(100, 160))
eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:40]), False),)))
for k in (1, 4, 8):
    whole, fused = [], []
    for rep in range(a.reps + 1):
        inner.clear()
        t0 = time.perf_counter()
        eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:40 + k]), EVERY_ROW),)))
        if rep:
            whole.append(time.perf_counter() - t0)
            fused.append(sum(inner))
    w, f = statistics.median(whole) * 1e3, statistics.median(fused) * 1e3
    print(f"{k} rows: round {w:.2f} ms, Fused.run {f:.2f} ms, around it {w - f:.2f} ms "
          f"(rounds {[round(x * 1e3, 1) for x in whole]})")
print("threading layer:", numba.threading_layer() if numba.config.THREADING_LAYER else "?",
      "loadavg", os.getloadavg())
pr = cProfile.Profile()
pr.enable()
for _ in range(5):
    eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:48]), EVERY_ROW),)))
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(12)
