"""One stream's chunk of 1 / 4 / 8 rows at --keys keys (40) through the engine (every row's logits),
the fused round's crew at 1 and at 2 threads alternated round by round; medians in ms.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/threads.py [--reps 9] [--keys 40]
"""
import argparse
import os
import statistics
import time

import kernels
kernels.init()
import numba  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=9)
ap.add_argument("--keys", type=int, default=40)
a = ap.parse_args()
eng = open_model(None, progress=False).engine
P = a.keys // 16 + 4
eng.apply(PoolStep(True, P, 16, (eng.page_bytes(16),), 1, P * 16))
eng.apply(BeginStep(0, tuple(range(P))))
KEYS = a.keys
ids = [100 + i % 1000 for i in range(KEYS + 20)]
for c0 in range(0, KEYS, 256):
    eng.apply(RoundStep((Chunk(0, c0, tuple(ids[c0:min(KEYS, c0 + 256)]), False),)))
sizes, threads = (1, 4, 8), (1, 2)
t = {(k, n): [] for k in sizes for n in threads}
for rep in range(a.reps + 1):
    for k in sizes:
        for n in threads:
            numba.set_num_threads(n)
            t0 = time.perf_counter()
            eng.apply(RoundStep((Chunk(0, KEYS, tuple(ids[KEYS:KEYS + k]), EVERY_ROW),)))
            if rep:
                t[k, n].append(time.perf_counter() - t0)
med = {key: statistics.median(v) * 1e3 for key, v in t.items()}
for n in threads:
    line = ", ".join(f"{k} rows {med[k, n]:.2f}" for k in sizes)
    ex = ", ".join(f"1->{k} {(med[k, n] - med[1, n]) / (k - 1):.2f} ms/row "
                   f"({(med[k, n] / med[1, n] - 1) / (k - 1):.2f} of a round)" for k in sizes[1:])
    print(f"threads {n}: {line}; per extra row {ex}")
print("loadavg", os.getloadavg())
