import sys, time, os
import server  # noqa
import numpy as np
import numba
import kernels; kernels.init()
from kernels import kquant_cpu as KQ
rng = np.random.default_rng(0)
junk = np.ones(12 << 20, np.float64)
def mk(N, K):
    d = rng.integers(0, 255, (N, K // 32 * 34), dtype=np.uint8)
    d.reshape(N, -1, 34)[:, :, 1] = 0x3c >> 2  # small scale
    return d
mats = {"wkv_a 576x2048": mk(576, 2048), "wq_a 768x2048": mk(768, 2048), "wq 5120x768": mk(5120, 768),
        "wo 2048x5120": mk(2048, 5120), "sh_gu 3072x2048": mk(3072, 2048), "wgu 20480x2048": mk(20480, 2048)}
for flush in (False, True):
  for th in (1, 2):
    numba.set_num_threads(th)
    for name, d in mats.items():
        x = rng.standard_normal((1, d.shape[1] // 34 * 32)).astype(np.float32)
        KQ.q80_matmul(x, d)
        ts = []
        for _ in range(40):
            if flush: junk.sum()
            t0 = time.perf_counter(); KQ.q80_matmul(x, d); ts.append(time.perf_counter() - t0)
        med = np.median(ts)
        print(f"flush {flush} threads {th} {name:18s} {d.nbytes/1e6:6.1f} MB {med*1e6:8.1f} us {d.nbytes/med/1e9:5.1f} GB/s", flush=True)
print(os.getloadavg())
