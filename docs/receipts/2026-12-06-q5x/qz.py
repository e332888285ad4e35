import kernels; kernels.init()
import time, numpy as np
from kernels import kquant_cpu as KQ
rng = np.random.default_rng(0)
for M, K in ((4096, 1408), (512, 4096), (512, 1408)):
    x = rng.standard_normal((M, K)).astype(np.float32)
    KQ.quantize_q80(x); q, dx = KQ.quantize_q80(x)
    gs = np.empty((M, q.shape[1] // 64, 32), np.int32); KQ.q5_aux(q, dx, gs)
    t = time.perf_counter(); [KQ.quantize_q80(x) for _ in range(5)]; tq = (time.perf_counter() - t) / 5
    t = time.perf_counter(); [KQ.q5_aux(q, dx, gs) for _ in range(5)]; ta = (time.perf_counter() - t) / 5
    print(f"{M}x{K}: quantize_q80 {tq*1e3:.2f} ms, q5_aux {ta*1e3:.2f} ms")
