"""What one more row of a verify chunk costs, in parts (the default model, CPU): one
stream's chunk of 1 / 4 / 8 / 9 rows (every row's logits) at 40 keys (attention next to
nothing) through the engine, against the block products alone (kernels/blocks_vec.matmul
on random Q4_1 blocks of the model's shapes: 30 layers' qkv, o, gate_up, down and the head)
at M = 1 / 4 / 8 / 9, alternated rep by rep; medians in ms.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts-3/row_parts.py [--reps 9]
"""
import argparse
import os
import statistics
import time

import numpy as np

import kernels
kernels.init()
from kernels import blocks_vec as bv  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=9)
a = ap.parse_args()
eng = open_model(None, progress=False).engine
eng.apply(PoolStep(True, 64, 16, (eng.page_bytes(16),), 1, 512))
eng.apply(BeginStep(0, tuple(range(8))))
ids = list(range(100, 160))
eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:40]), False),)))
rng = np.random.default_rng(0)
SH = [(640 + 320, 576), (576, 576), (3072, 576), (576, 1536)]   # qkv (q 576 + k, v 192), o, gate_up, down
W = []
for N, K in SH + [(49152, 576)]:
    d = rng.integers(0, 255, (N, K // 32 * 20), dtype=np.uint8)
    blk = d.reshape(N, K // 32, 20)
    blk[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8)
    blk[:, :, 2:4] = np.frombuffer(np.float16(-0.05).tobytes(), np.uint8)
    W.append((d, K))


def products(M):
    for d, K in W[:4]:
        x = np.ones((M, K), np.float32)
        for _ in range(30):
            bv.matmul(x, "Q4_1", d)
    bv.matmul(np.ones((M, 576), np.float32), "Q4_1", W[4][0])


sizes = (1, 4, 8, 9)
eng_t = {k: [] for k in sizes}
mm_t = {k: [] for k in sizes}
for k in sizes:                                   # warm
    eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:40 + k]), EVERY_ROW),)))
    products(k)
for _ in range(a.reps):
    for k in sizes:
        t0 = time.perf_counter()
        eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:40 + k]), EVERY_ROW),)))
        eng_t[k].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        products(k)
        mm_t[k].append(time.perf_counter() - t0)
e1, m1 = statistics.median(eng_t[1]) * 1e3, statistics.median(mm_t[1]) * 1e3
for k in sizes:
    e, m = statistics.median(eng_t[k]) * 1e3, statistics.median(mm_t[k]) * 1e3
    extra = f"; per extra row: engine {(e - e1) / (k - 1):.2f} ms ({(e / e1 - 1) / (k - 1):.2f} of a " \
            f"one-row round), products {(m - m1) / (k - 1):.2f} ms" if k > 1 else ""
    print(f"1x{k}: engine round {e:.1f} ms, the block products alone {m:.1f} ms{extra}")
print("loadavg", os.getloadavg())
