"""Cold compile of the new numba functions (kernels/moe_cpu.py's router product, route+group,
combine) in a fresh NUMBA_CACHE_DIR: each first call's seconds (wall and CPU) less a second
call's, at the signatures the engine and the tests use.

    NUMBA_CACHE_DIR=$(mktemp -d) PYTHONPATH=<tree> python compile_cost.py
"""
import time

import kernels

kernels.init()
import numpy as np  # noqa: E402

from kernels import moe_cpu  # noqa: E402
from kernels.blocks import Blocks  # noqa: E402
from kernels.moe import Routing  # noqa: E402

rng = np.random.default_rng(0)
w = rng.standard_normal((64, 256)).astype(np.float32)
W = Blocks("F32", 64, 256, w.view(np.uint8).reshape(64, 1024))
x = rng.standard_normal((2, 256)).astype(np.float32)
logits = rng.standard_normal((2, 64)).astype(np.float32)
bias = rng.standard_normal(64).astype(np.float32)
ids = None


def calls():
    global ids
    moe_cpu.router_logits(x, W)
    moe_cpu.router_logits(x, W)               # the crew's first call compiles; its second runs it
    got = moe_cpu.route_group(logits, Routing("softmax", 4, True, 1.0))
    moe_cpu.route_group(logits, Routing("sigmoid", 4, True, 2.5, 4, 2), bias)
    moe_cpu.combine_grouped(rng.standard_normal((8, 256)).astype(np.float32), got[6], got[1])


t, c = time.perf_counter(), time.process_time()
calls()
t1, c1 = time.perf_counter() - t, time.process_time() - c
t, c = time.perf_counter(), time.process_time()
calls()
t2, c2 = time.perf_counter() - t, time.process_time() - c
print(f"first calls {t1:.2f} s wall ({c1:.2f} s CPU), second {t2 * 1e3:.1f} ms: compile "
      f"~{t1 - t2:.2f} s")
