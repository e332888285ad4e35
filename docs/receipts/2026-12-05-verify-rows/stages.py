"""Where a verify row's cost goes (the default model, CPU): one stream's chunk of 1 / 4 / 8 rows
(every row's logits) at 40 keys through the engine, against each stage's numba kernel called
alone on the model's own weights and shapes (the fused round's row kernels over whole
matrices, the head, SwiGLU), at the same thread count; medians in ms.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/stages.py [--reps 7] [--threads 1]
"""
import argparse
import os
import statistics
import time

import numpy as np

import kernels
kernels.init()
import numba  # noqa: E402
from kernels import blocks_vec as bv  # noqa: E402
from kernels.rmsnorm_cpu import swiglu_span  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=7)
ap.add_argument("--threads", type=int, default=1)
ap.add_argument("--sizes", default="1,4,8")
a = ap.parse_args()
numba.set_num_threads(a.threads)
eng = open_model(None, progress=False).engine
eng.apply(PoolStep(True, 64, 16, (eng.page_bytes(16),), 1, 512))
eng.apply(BeginStep(0, tuple(range(8))))
ids = list(range(100, 160))
eng.apply(RoundStep((Chunk(0, 0, tuple(ids[:40]), False),)))


def find_fused(o, depth=0, seen=set()):
    from kernels.forward_cpu import Fused
    if isinstance(o, Fused):
        return o
    if depth > 4 or id(o) in seen:
        return None
    seen.add(id(o))
    for v in getattr(o, "__dict__", {}).values():
        f = find_fused(v, depth + 1)
        if f is not None:
            return f
    return None


fu = find_fused(eng)
w = fu.w
kinds = fu.kinds
print("kinds (qkv, o, gu, down, head):", kinds, "threads", a.threads)
mats = [("qkv", kinds[0], w.wqkv), ("o", kinds[1], w.wo), ("gate_up", kinds[2], w.wgu),
        ("down", kinds[3], w.wdown)]
rng = np.random.default_rng(0)


def K_of(kind, d):
    return d.shape[1] // bv.BLOCK_BYTES[kind] * 32


def mat_time(kind, d, M):
    K = K_of(kind, d)
    x = rng.standard_normal((M, K)).astype(np.float32)
    xs = np.empty((M, K // 32), np.float32)
    bv.block_sums(x, xs)
    out = np.empty((M, d.shape[0]), np.float32)
    rows = bv.ROW_KERNELS[kind]
    t0 = time.perf_counter()
    rows(x, xs, d, out, 0, d.shape[0])
    return time.perf_counter() - t0


def stage_times(M):
    t = {}
    for name, kind, ds in mats:
        t[name] = sum(mat_time(kind, d, M) for d in ds)
    t["head"] = mat_time(kinds[4], w.wh, M)
    ff = w.ff
    gu = rng.standard_normal((M, 2 * ff)).astype(np.float32)
    act = np.empty((M, ff), np.float32)
    t0 = time.perf_counter()
    for _ in range(len(w.wqkv)):
        for i in range(M):
            swiglu_span(gu[i, :ff], gu[i, ff:], act[i], 0, ff)
    t["swiglu"] = time.perf_counter() - t0
    return t


sizes = tuple(int(s) for s in a.sizes.split(","))
eng_t = {k: [] for k in sizes}
st_t = {k: [] for k in sizes}
for k in sizes:
    eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:40 + k]), EVERY_ROW),)))
    stage_times(k)
for _ in range(a.reps):
    for k in sizes:
        t0 = time.perf_counter()
        eng.apply(RoundStep((Chunk(0, 40, tuple(ids[40:40 + k]), EVERY_ROW),)))
        eng_t[k].append(time.perf_counter() - t0)
        st_t[k].append(stage_times(k))
med = {k: statistics.median(eng_t[k]) * 1e3 for k in sizes}
names = list(st_t[sizes[0]][0])
sm = {k: {n: statistics.median(r[n] for r in st_t[k]) * 1e3 for n in names} for k in sizes}
print("rows | engine | " + " | ".join(names) + " | stages sum | engine - stages")
for k in sizes:
    s = sum(sm[k].values())
    print(f"{k} | {med[k]:.2f} | " + " | ".join(f"{sm[k][n]:.2f}" for n in names)
          + f" | {s:.2f} | {med[k] - s:.2f}")
k0 = sizes[0]
for k in sizes[1:]:
    d = (k - k0)
    print(f"per extra row {k0}->{k}: engine {(med[k] - med[k0]) / d:.2f}; "
          + ", ".join(f"{n} {(sm[k][n] - sm[k0][n]) / d:.2f}" for n in names))
print("loadavg", os.getloadavg())
