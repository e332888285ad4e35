# run: PYTHONPATH=<tree> python compile_q80.py <fresh NUMBA_CACHE_DIR>
"""Cold numba compile of the Q8_0 and Q5_0 rows (fresh NUMBA_CACHE_DIR = argv[1]), and a hash of
q80_matmul's output bytes at M = 1..9 (every tail) for each kind. Run with PYTHONPATH=<tree>."""
import hashlib, os, sys, time
os.environ["NUMBA_CACHE_DIR"] = sys.argv[1]
import numpy as np
import kernels
kernels.init()
os.environ["NUMBA_CACHE_DIR"] = sys.argv[1]
t0 = time.perf_counter()
from kernels import kquant_cpu as kq
t_imp = time.perf_counter() - t0
rng = np.random.default_rng(7)
K, N = 256, 37
res = {}
for kind, bb in (("Q8_0", 34), ("Q5_0", 22)):
    data = rng.integers(0, 256, (N, K // 32 * bb), dtype=np.uint8)
    blk = data.reshape(N, K // 32, bb)
    blk[:, :, :2] = rng.uniform(0.001, 0.05, (N, K // 32)).astype(np.float16).view(np.uint8).reshape(N, K // 32, 2)
    h = hashlib.sha256()
    t, c = time.perf_counter(), time.process_time()
    for M in range(1, 10):
        x = rng.standard_normal((M, K)).astype(np.float32)
        h.update(kq.q80_matmul(x, data, kind=kind).tobytes())
    res[kind] = (time.perf_counter() - t, time.process_time() - c, h.hexdigest()[:16])
print(f"import {t_imp:.2f} s; " + "; ".join(f"{k} first calls {t:.2f} s ({c:.2f} s CPU) bytes {d}" for k, (t, c, d) in res.items()))
