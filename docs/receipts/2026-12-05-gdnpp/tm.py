import sys, time, os
import numpy as np
import kernels
kernels.init()
import numba
from kernels import gdn_cpu, _gdn_cpu_orig_tmp as old
rng = np.random.default_rng(0)
nk, nv, dk, dv, K, n = 16, 32, 128, 128, 4, int(sys.argv[1])
C = 2 * nk * dk + nv * dv
f = lambda *s: rng.standard_normal(s).astype(np.float32)
args = (f(n, C), f(n, nv * dv), f(n, nv), f(n, nv), f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv))
for th in (2, 1):
    numba.set_num_threads(th)
    for mod in (old, gdn_cpu, old, gdn_cpu):
        best = 1e9
        for r in range(3):
            st, wi = np.zeros((nv, dk, dv), np.float32), np.zeros((K - 1, C), np.float32)
            t = time.perf_counter()
            mod.chunk(*args, 1e-6, wi, st, nk)
            best = min(best, time.perf_counter() - t)
        dec = 1e9
        for r in range(3):
            t = time.perf_counter()
            for i in range(16):
                mod.chunk(*(x[i:i+1] for x in args[:4]), *args[4:], 1e-6, wi, st, nk)
            dec = min(dec, (time.perf_counter() - t) / 16)
        print(f"threads {th} {mod.__name__:28s} chunk {n}: {best*1e3:.1f} ms; one position: {dec*1e3:.3f} ms", flush=True)
print(os.getloadavg())
