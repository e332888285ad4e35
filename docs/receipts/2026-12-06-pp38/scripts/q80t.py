import server, time
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import kquant_cpu as K
rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 1408)).astype(np.float32)
Kp = (1408 + 63)//64*64
q, dx = np.empty((4096, Kp), np.int8), np.empty((4096, Kp//32), np.float32)
q2, dx2 = q.copy(), dx.copy()
for r in range(4):
    t = time.perf_counter(); K.quantize_q80_rows_ref(x, q, dx); a = time.perf_counter() - t
    t = time.perf_counter(); K.quantize_q80_rows(x, q2, dx2); b = time.perf_counter() - t
    t = time.perf_counter(); K.quantize_q80(x); c = time.perf_counter() - t
    print(f"ref {a*1e3:.2f} ms  new {b*1e3:.2f} ms  quantize_q80 (halves) {c*1e3:.2f} ms  equal {np.array_equal(q, q2) and np.array_equal(dx.view(np.int32), dx2.view(np.int32))}")
