# one-thread CPU time (thread_time) per product, best of reps
import sys, time, os
import kernels; kernels.init()
import numpy as np, numba
from kernels import kquant_cpu as KQ
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
numba.set_num_threads(1)
rng = np.random.default_rng(0)
cases = [("Q4_K", 1536, 2048, 1), ("Q4_K", 1536, 2048, 8), ("Q4_K", 1536, 2048, 32), ("Q4_K", 1536, 2048, 512), ("Q6_K", 16384, 2048, 1), ("Q6_K", 16384, 2048, 8), ("Q6_K", 2048, 768, 32)]
for kind, N, K, M in cases:
    w = random_rows(rng, kind, N, K); x = rng.standard_normal((M, K)).astype(np.float32)
    q, dx, gs = KQ.quantize(x); out = np.empty((M, N), np.float32)
    f = lambda: KQ.grouped_q(q, dx, gs, kind, w[None], KQ._ONE, np.array([0, M], np.int64), out)
    f()
    reps = max(3, int(2e9 // (M * N * K)))
    ts = []
    for _ in range(reps):
        t0 = time.thread_time(); f(); ts.append(time.thread_time() - t0)
    ts.sort()
    print(f"{kind} {N}x{K} M={M}: {M*N*K/ts[0]/1e9:.1f} GMAC/s (median {M*N*K/ts[len(ts)//2]/1e9:.1f}) cpu", flush=True)
