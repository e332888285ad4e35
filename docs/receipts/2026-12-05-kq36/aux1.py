import time
import server  # noqa
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
x = np.random.default_rng(0).standard_normal((1, 2048)).astype(np.float32)
q, dx, gs = KQ.quantize(x)
offs = np.array([0, 1], np.int64)
KQ._aux("Q4_K", True, gs, dx, offs)
n = 20000
t = time.perf_counter()
for _ in range(n): KQ._aux("Q4_K", True, gs, dx, offs)
print(f"_aux M=1: {(time.perf_counter()-t)/n*1e6:.2f} us a call")
