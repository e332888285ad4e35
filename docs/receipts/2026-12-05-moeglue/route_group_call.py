import time
import kernels; kernels.init()
import numpy as np
from kernels import moe_cpu
from kernels.moe import Routing
r = Routing("softmax", 8, True, 1.0)
l = np.random.default_rng(0).standard_normal((1, 256)).astype(np.float32)
moe_cpu.route_group(l, r)
for rep in range(3):
    t = time.perf_counter()
    for _ in range(2000): moe_cpu.route_group(l, r)
    a = (time.perf_counter() - t) / 2000
    args = (l, 0, 8, True, 1.0, 1, 1, moe_cpu._NO_BIAS)
    t = time.perf_counter()
    for _ in range(2000): moe_cpu._route_group(*args)
    b = (time.perf_counter() - t) / 2000
    print(f"wrapper {a*1e6:.1f} us, kernel call {b*1e6:.1f} us")
