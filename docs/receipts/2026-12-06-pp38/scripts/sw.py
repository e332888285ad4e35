import server, time, sys
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import ops_cpu
ops = ops_cpu.NumbaOps()
rng = np.random.default_rng(0)
for F in (768, 1408):
    g = rng.standard_normal((4096, F)).astype(np.float32); u = rng.standard_normal((4096, F)).astype(np.float32)
    for blk in (1 << 40, ops_cpu.SWIGLU_BLOCK, 1 << 15, 1 << 17):
        ops_cpu.SWIGLU_BLOCK = blk
        ts = []
        for r in range(7):
            c = time.process_time(); t = time.perf_counter(); ops.swiglu_rows(g, u); ts.append((time.perf_counter() - t, time.process_time() - c))
        ts.sort()
        print(f"F={F} block={blk}: median {ts[3][0]*1e3:.2f} ms ({ts[3][1]/ts[3][0]:.2f} cores), min {ts[0][0]*1e3:.2f}")
