import time, numpy as np
t0 = time.perf_counter()
import kernels
kernels.init()
from kernels import gdn_cpu
t1 = time.perf_counter()
rng = np.random.default_rng(0)
nk, nv, dk, dv, K, n = 2, 6, 32, 32, 4, 90
C = 2 * nk * dk + nv * dv
f = lambda *s: rng.standard_normal(s).astype(np.float32)
st, wi = f(nv, dk, dv), f(K - 1, C)
gdn_cpu.chunk(f(n, C), f(n, nv * dv), f(n, nv), f(n, nv), f(C, K), f(nv), f(nv), f(dv), 1e-6, wi, st, nk)
gdn_cpu.chunk(f(1, C), f(1, nv * dv), f(1, nv), f(1, nv), f(C, K), f(nv), f(nv), f(dv), 1e-6, wi, st, nk)
print(f"import {t1 - t0:.1f} s, compile+run {time.perf_counter() - t1:.1f} s")
