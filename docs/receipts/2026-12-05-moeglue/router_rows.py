"""The router kernel against blocks_cpu.matmul (F32) at batches 1..512: bytes, then times (one 2 MB matrix, cache-warm).
    PYTHONPATH=<tree> python router_rows.py          (under the bench lock)"""
import time
import kernels; kernels.init()
import numpy as np
from kernels import moe_cpu, blocks_cpu
from kernels.blocks import Blocks
rng = np.random.default_rng(0)
N, K = 256, 2048
b = Blocks("F32", N, K, rng.standard_normal((N, K)).astype(np.float32).view(np.uint8).reshape(N, K * 4))
moe_cpu.ROUTER_ROWS = 1 << 20
for T in (1, 8, 16, 64, 512):
    x = rng.standard_normal((T, K)).astype(np.float32)
    assert blocks_cpu.matmul(x, "F32", b.data).tobytes() == moe_cpu.router_logits(x, b).tobytes()
    for rnd in range(2):
        res = []
        for name, f in (("old", lambda: blocks_cpu.matmul(x, "F32", b.data)), ("new", lambda: moe_cpu.router_logits(x, b))):
            reps = max(2, 400 // T)
            t = time.perf_counter()
            for _ in range(reps):
                f()
            res.append(f"{name} {(time.perf_counter() - t) / reps * 1e6:.0f} us")
        print(T, *res, flush=True)
print(open("/proc/loadavg").read())
