import time
import server  # noqa
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
x = np.random.default_rng(0).standard_normal((4096, 2048)).astype(np.float32)
q, dx, gs = KQ.quantize(x)
offs = np.arange(0, 4097, 32).astype(np.int64)
KQ._aux("Q4_K", True, gs, dx, offs)
for _ in range(3):
    t = time.perf_counter(); c = time.thread_time(); KQ._aux("Q4_K", True, gs, dx, offs); print(f"aux 4096x2048 {1e3*(time.perf_counter()-t):.2f} ms wall {1e3*(time.thread_time()-c):.2f} cpu")
