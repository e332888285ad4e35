import sys, time, os
import server  # noqa
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu as KQ
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
thr = int(sys.argv[1]); numba.set_num_threads(thr)
rng = np.random.default_rng(0)
tag = "old" if "kq36-base" in os.getcwd() else "new"
for kind, N, K in (("Q4_K", 5120, 2048), ("Q4_K", 2048, 4096), ("Q4_K", 768, 2048)):
    w = random_rows(rng, kind, N, K)
    x = rng.standard_normal((512, K)).astype(np.float32)
    KQ.matmul(x, kind, w)
    best = 1e9
    for _ in range(3):
        t = time.perf_counter(); c = time.process_time(); KQ.matmul(x, kind, w); dt = time.perf_counter() - t
        if dt < best: best, bc = dt, time.process_time() - c
    mac = 512 * N * K
    print(f"{tag} dense {kind} N={N} K={K} M=512 thr={thr}: {best*1e3:7.2f} ms {mac/best/1e9:6.1f} GMAC/s wall {mac/bc/1e9:6.1f} a core ({bc/best:.2f} cores)", flush=True)
