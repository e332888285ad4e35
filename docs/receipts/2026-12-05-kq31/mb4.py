"""one-thread CPU time of `rows` variants (uncached, built here) on one expert matrix."""
import sys, time
import kernels; kernels.init()
import numpy as np, numba
from numba import njit
from kernels import kquant_cpu as KQ
from kernels.blocks_cpu import F16
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows

import os
XB = int(os.environ.get("XB", "0"))
def make(kind, R, C, form):
    KQ.ONE_ROW_FORM = form
    tm = KQ._make_tile(kind, R, C, True)
    t14 = KQ._make_tile(kind, 1, 4, True); t41 = KQ._make_tile(kind, 4, 1, True); t11 = KQ._make_tile(kind, 1, 1, True)
    KQ.ONE_ROW_FORM = True
    RR, CC = R, C
    @njit(boundscheck=False, nogil=True)
    def rows(q, dx, gs, data, out, lo, hi):
        M, K = q.shape
        MC = M - M % CC
        xb = XB if XB > 0 else MC
        for i0 in range(0, MC, xb):
          i1 = min(i0 + xb, MC)
          n = lo
          while n + RR <= hi:
            for i in range(i0, i1, CC):
                r = tm(data, n, q, i, dx, gs)
                for a in range(RR):
                    for c in range(CC):
                        out[i + c, n + a] = r[a * CC + c]
            n += RR
        while n < hi:
            for i in range(0, MC, 4):
                r = t14(data, n, q, i, dx, gs)
                for c in range(4):
                    out[i + c, n] = r[c]
            n += 1
        i = MC
        if M - i >= 4:
            for n in range(lo, hi):
                r = t14(data, n, q, i, dx, gs)
                for c in range(4):
                    out[i + c, n] = r[c]
            i += 4
        while i < M:
            n = lo
            while n + 4 <= hi:
                r = t41(data, n, q, i, dx, gs)
                for a in range(4):
                    out[i, n + a] = r[a]
                n += 4
            while n < hi:
                out[i, n] = t11(data, n, q, i, dx, gs)
                n += 1
            i += 1
    return rows

kind = sys.argv[1]; M = int(sys.argv[2]); N, K = int(sys.argv[3]), int(sys.argv[4])
variants = [v.split("x") + [f] for f, vs in (("old", sys.argv[5].split(",")), ("new", sys.argv[6].split(","))) for v in vs if v]
rng = np.random.default_rng(0)
w = random_rows(rng, kind, N, K); x = rng.standard_normal((M, K)).astype(np.float32)
q, dx, gs = KQ.quantize(x)
ref = np.empty((M, N), np.float32)
KQ.matmul_ref_rows(kind == "Q6_K", q, dx, gs, w, F16, ref)
fs = []
for R, C, form in variants:
    f = make(kind, int(R), int(C), form == "new")
    o = np.empty((M, N), np.float32); f(q, dx, gs, w, o, 0, N)
    assert o.tobytes() == ref.tobytes(), (R, C, form)
    fs.append((f"{R}x{C}-{form}", f, o))
res = {k: [] for k, _, _ in fs}
for rep in range(5):
    for name, f, o in fs:
        ts = []
        for _ in range(3):
            t0 = time.thread_time(); f(q, dx, gs, w, o, 0, N); ts.append(time.thread_time() - t0)
        res[name].append(M * N * K / min(ts) / 1e9)
print(f"{kind} {N}x{K} M={M} (bytes == dot_ref):", "  ".join(f"{k} {max(v):.1f}/{np.median(v):.1f}" for k, v in res.items()), "load", open("/proc/loadavg").read().split()[:3], flush=True)
