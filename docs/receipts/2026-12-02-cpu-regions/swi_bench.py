import sys, time, numpy as np
sys.path.insert(0, '/work/main')
from kernels import rmsnorm_cpu as R
g = np.random.default_rng(0).standard_normal(1536 * 8).astype(np.float32) * 3
u = np.random.default_rng(1).standard_normal(1536 * 8).astype(np.float32)
o = np.empty_like(g)
R.swiglu_span(g, u, o, 0, g.shape[0])
best = min((lambda t: (R.swiglu_span(g, u, o, 0, g.shape[0]), time.perf_counter() - t)[1])(time.perf_counter()) for _ in range(2000))
print(f"swiglu 8 x 1536: {best*1e6:.2f} us; a round at b8 (30 layers): {best*30*1e3:.3f} ms")
ref = (g / (1 + np.exp(-g.astype(np.float64))) * u)
print("max rel err", np.abs(o - ref).max() / np.abs(ref).max())
