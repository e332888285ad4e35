import time
import server  # noqa
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
x = np.random.default_rng(0).standard_normal((4096, 1408)).astype(np.float32)
KQ.quantize_q80(x)
for _ in range(3):
    t = time.perf_counter(); c = time.thread_time(); KQ.quantize_q80(x); print(f"q80 4096x1408 {1e3*(time.perf_counter()-t):.2f} ms wall {1e3*(time.thread_time()-c):.2f} cpu")
x = x[:, :1280].copy()
for _ in range(2):
    t = time.perf_counter(); c = time.thread_time(); KQ.quantize(x[:, :1280]); print(f"q8K 4096x1280 {1e3*(time.perf_counter()-t):.2f} ms wall {1e3*(time.thread_time()-c):.2f} cpu")
