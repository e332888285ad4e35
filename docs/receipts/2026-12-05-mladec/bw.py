import sys, time, os
import server  # noqa
import numpy as np, numba
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
th = int(sys.argv[1])
numba.set_num_threads(th)
rng = np.random.default_rng(0)
d = rng.integers(0, 255, (100000, 2176), dtype=np.uint8)   # 217 MB
d.reshape(100000, -1, 34)[:, :, 1] = 0x0f
x = rng.standard_normal((1, 2048)).astype(np.float32)
KQ.q80_matmul(x, d)
ts = []
for _ in range(15):
    t0 = time.perf_counter(); KQ.q80_matmul(x, d); ts.append(time.perf_counter() - t0)
print(f"cpus {os.sched_getaffinity(0)} threads {th}: {d.nbytes/np.median(ts)/1e9:.1f} GB/s  (best {d.nbytes/min(ts)/1e9:.1f})  load {os.getloadavg()[0]:.2f}", flush=True)
