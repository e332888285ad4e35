import kernels; kernels.init()
import numpy as np, time
from kernels import swiglu, ops_cpu
import numba
numba.set_num_threads(2)
o = [c for c in vars(ops_cpu).values() if isinstance(c, type) and hasattr(c, "swiglu_rows") and "_paired" in vars(c)][0]
ops = o.__new__(o)
rng = np.random.default_rng(1)
for M, F in ((4096, 768), (65, 96), (512, 1408), (4097, 33)):
    gu = (rng.standard_normal((M, 2 * F)) * 6).astype(np.float32)
    gu[0, :5] = [np.inf, -np.inf, np.nan, 88.8, -104.]
    g, u = gu[:, :F], gu[:, F:]
    want = swiglu.ref(g, u)
    got = ops.swiglu_rows(g, u)
    assert want.tobytes() == got.tobytes(), (M, F)
    gc, uc = np.ascontiguousarray(g), np.ascontiguousarray(u)
    assert swiglu.ref(gc, uc).tobytes() == ops.swiglu_rows(gc, uc).tobytes()
print("bytes equal", ops._paired(4096), numba.get_num_threads())
gu = rng.standard_normal((4096, 1536)).astype(np.float32); g, u = gu[:, :768], gu[:, 768:]
for r in range(3):
    t = time.perf_counter(); c = time.process_time()
    for _ in range(20): ops.swiglu_rows(g, u)
    print(f"{(time.perf_counter() - t) / 20 * 1e3:.2f} ms a call, {(time.process_time() - c) / (time.perf_counter() - t):.2f} cores")
