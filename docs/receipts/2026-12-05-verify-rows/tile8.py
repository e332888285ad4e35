"""8 x rows at K = 576: the rows kernel as built (one 1x8 tile pass) against the same kernel
without its 1x8 branch (two 2x4 passes), on the default model's own matrices (30 layers'
qkv, o, gate_up: Q4_1; the head: Q8_0), one thread, interleaved A/B; medians in ms; and
whether the two give the same bytes.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/tile8.py [--reps 9] [--rows 8]
"""
import argparse
import os
import statistics
import time

import numpy as np

import kernels
kernels.init()
from numba import njit  # noqa: E402
from kernels import blocks_vec as bv  # noqa: E402
from kernels.forward_cpu import Fused  # noqa: E402
from server.engine.build import open_model  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=9)
ap.add_argument("--rows", type=int, default=8)
a = ap.parse_args()


def without_18(kind):
    t11, t41 = bv._make_tile(kind, 1, 1, bv.TABLE), bv._make_tile(kind, 4, 1, bv.TABLE)
    t14, t24 = bv._make_tile(kind, 1, 4, bv.TABLE), bv._make_tile(kind, 2, 4, bv.TABLE)
    side_by_side = bv.side_by_side

    @njit(boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        M, K = x.shape
        i = 0
        while i + 4 <= M:
            xst = side_by_side(xsum, i, 4)
            n = lo
            while n + 2 <= hi:
                r = t24(data, n, x, i, xst)
                for q in range(2):
                    for c in range(4):
                        out[i + c, n + q] = r[4 * q + c]
                n += 2
            if n < hi:
                r = t14(data, n, x, i, xst)
                for c in range(4):
                    out[i + c, n] = r[c]
            i += 4
        while i < M:
            n = lo
            while n + 4 <= hi:
                r = t41(data, n, x, i, xsum[i])
                for q in range(4):
                    out[i, n + q] = r[q]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, x, i, xsum[i])
                n += 1
            i += 1
    return rows


m = open_model(None, progress=False)


def find(o, d=0, seen=set()):
    if isinstance(o, Fused):
        return o
    if d > 4 or id(o) in seen:
        return None
    seen.add(id(o))
    for v in getattr(o, "__dict__", {}).values():
        f = find(v, d + 1)
        if f is not None:
            return f


fu = find(m.engine)
w, kinds = fu.w, fu.kinds
sets = {"qkv": (kinds[0], w.wqkv), "o": (kinds[1], w.wo), "gate_up": (kinds[2], w.wgu),
        "head": (kinds[4], (w.wh,))}
rng = np.random.default_rng(0)
M = a.rows
x = rng.standard_normal((M, 576)).astype(np.float32)
xs = np.empty((M, 18), np.float32)
bv.block_sums(x, xs)
B = {k: without_18(k) for k in set(kinds)}
t = {(n, v): [] for n in sets for v in "AB"}
same = True
for rep in range(a.reps + 1):
    for n, (kind, ds) in sets.items():
        for v in "AB":
            f = bv.ROW_KERNELS[kind] if v == "A" else B[kind]
            outs = [np.empty((M, d.shape[0]), np.float32) for d in ds]
            t0 = time.perf_counter()
            for d, o in zip(ds, outs):
                f(x, xs, d, o, 0, d.shape[0])
            if rep:
                t[n, v].append(time.perf_counter() - t0)
            if v == "A":
                ref = outs
            else:
                same &= all(np.array_equal(p.view(np.uint32), q.view(np.uint32)) for p, q in zip(ref, outs))
for n in sets:
    ma, mb = (statistics.median(t[n, v]) * 1e3 for v in "AB")
    print(f"{n} ({sets[n][0]}, {len(sets[n][1])} matrices) at {M} rows: 1x8 {ma:.2f} ms, 2x4 twice {mb:.2f} ms "
          f"(B/A {mb / ma:.3f}; A {sorted(round(v * 1e3, 2) for v in t[n, 'A'])})")
print("bytes equal:", same, "loadavg", os.getloadavg())
