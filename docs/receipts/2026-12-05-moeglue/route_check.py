"""numba route_group against kernels/moe.route on 20,000 random rows a router kind: ids equal, float32 weights differing (bytes)."""
import kernels; kernels.init()
import numpy as np
from kernels import moe_cpu
from kernels.moe import Routing, route
rng = np.random.default_rng(5)
for r in (Routing("softmax", 8, True, 1.0), Routing("sigmoid", 8, True, 2.5, 8, 4), Routing("topk_softmax", 4, False, 1.0), Routing("softmax", 8, False, 1.0)):
    l = (rng.standard_normal((20000, 256)) * 2).astype(np.float32)
    b = (rng.standard_normal(256) * 0.1).astype(np.float32)
    ids, w = moe_cpu.route_group(l, r, b)[:2]
    ri, rw = route(l, r, b)
    print(r.kind, r.norm, "ids equal", (ids == ri).all(), "weights differing", int((w.view(np.int32) != rw.view(np.int32)).sum()), "of", w.size)
