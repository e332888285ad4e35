import time
import kernels; kernels.init()
import numpy as np, numba
from kernels import blocks_cpu
rng = np.random.default_rng(0)
w = rng.standard_normal((128, 2048)).astype(np.float32).view(np.uint8).reshape(128, -1)
for M in (512, 64):
    x = rng.standard_normal((M, 2048)).astype(np.float32)
    blocks_cpu.matmul(x, "F32", w)
    c, s = time.process_time(), time.perf_counter()
    for _ in range(10): blocks_cpu.matmul(x, "F32", w)
    d = time.perf_counter() - s
    print(M, numba.threading_layer(), numba.get_num_threads(), f"{d/10*1e3:.2f} ms {(time.process_time()-c)/d:.2f} cores", flush=True)
