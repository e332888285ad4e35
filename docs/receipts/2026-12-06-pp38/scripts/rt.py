import server, time, sys
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import blocks_cpu, moe_cpu
from kernels.blocks import Blocks
rng = np.random.default_rng(1)
for (M, N, K) in [(17, 7, 64), (33, 128, 96), (512, 128, 2048), (100, 130, 4096), (21, 3, 32)]:
    w = rng.standard_normal((N, K)).astype(np.float32)
    wb = Blocks("F32", N, K, w.view(np.uint8).reshape(N, 4 * K))
    x = rng.standard_normal((M, K)).astype(np.float32)
    want = blocks_cpu.matmul(x, "F32", wb.data)
    got = moe_cpu.router_logits(x, wb)
    print(M, N, K, got.tobytes() == want.tobytes(), np.abs(got - want).max())
for (M, N, K) in [(512, 128, 2048), (512, 128, 4096)]:
    w = rng.standard_normal((N, K)).astype(np.float32)
    wb = Blocks("F32", N, K, w.view(np.uint8).reshape(N, 4 * K))
    x = rng.standard_normal((M, K)).astype(np.float32)
    for r in range(4):
        c = time.process_time(); t = time.perf_counter()
        moe_cpu.router_logits(x, wb)
        dt = time.perf_counter() - t; dc = time.process_time() - c
        c2 = time.process_time(); t2 = time.perf_counter()
        blocks_cpu.matmul(x, "F32", wb.data)
        dt2 = time.perf_counter() - t2; dc2 = time.process_time() - c2
        print(f"M={M} K={K}: new {dt*1e3:.2f} ms {dc/dt:.2f} cores; blocks_cpu {dt2*1e3:.2f} ms {dc2/dt2:.2f} cores")
