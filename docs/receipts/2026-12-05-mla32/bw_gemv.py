import time, numpy as np, kernels, sys
kernels.init()
import numba
from kernels import kquant_cpu as K
from bench.q8_kernels import q8_matrix
from concurrent.futures import ThreadPoolExecutor
rng = np.random.default_rng(0)
v = np.ones(1 << 30, np.uint8)
for th in (1, 2):
    parts = np.array_split(v, th); pool = ThreadPoolExecutor(th)
    list(pool.map(np.max, parts)); ts = []
    for _ in range(5):
        t = time.perf_counter(); list(pool.map(np.max, parts)); ts.append(time.perf_counter() - t)
    print(f"numpy max stream {th} threads: {v.nbytes/np.median(ts)/1e9:.1f} GB/s")
del v
W = q8_matrix(rng, 65536, 2048)   # 142 MB
x = rng.standard_normal((1, 2048)).astype(np.float32)
res = {1: [], 2: []}
for r in range(8):
    for th in (1, 2) if r % 2 == 0 else (2, 1):
        numba.set_num_threads(th)
        t = time.perf_counter(); K.q80_matmul(x, W); res[th].append(time.perf_counter() - t)
for th in (1, 2):
    print(f"q80 GEMV 142 MB, {th} thread(s): median {np.median(res[th])*1e3:.2f} ms = {W.nbytes/np.median(res[th])/1e9:.1f} GB/s")
