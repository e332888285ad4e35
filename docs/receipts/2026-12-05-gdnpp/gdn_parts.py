import sys, time, os
import numpy as np
import kernels
kernels.init()
from kernels import gdn_cpu, _gdn_cpu_orig_tmp as old
rng = np.random.default_rng(0)
nk, nv, dk, dv, K, n = 16, 32, 128, 128, 4, int(sys.argv[1])
C = 2 * nk * dk + nv * dv
f = lambda *s: rng.standard_normal(s).astype(np.float32)
mix, z, b, a, conv_w, A_log, dt_bias, norm_w = (f(n, C), f(n, nv * dv), f(n, nv), f(n, nv), f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv))
y = np.empty((n, C), np.float32); q = np.empty((n, nk, dk), np.float32); k = np.empty((n, nk, dk), np.float32); out = np.empty((n, nv*dv), np.float32)
wi = np.zeros((K - 1, C), np.float32); st = np.zeros((nv, dk, dv), np.float32)
def T(fn, *a):
    fn(*a); best = 1e9
    for r in range(3):
        t = time.process_time(); fn(*a); best = min(best, time.process_time() - t)
    return best * 1e3
for mod in (old, gdn_cpu):
    c = T(mod._conv, mix, conv_w if mod is old else np.ascontiguousarray(conv_w.T), wi, y, 0, C)
    nn = T(mod._norms, y, nk, dk, q, k, 0, n)
    h = T(lambda: [mod._head(hh, y, z, b, a, A_log, dt_bias, norm_w, np.float32(1e-6), st, nk, q, k, out) for hh in range(nv)])
    print(f"{mod.__name__}: conv {c:.1f} ms, norms {nn:.1f} ms, heads {h:.1f} ms (cpu time, one thread, n={n})")
