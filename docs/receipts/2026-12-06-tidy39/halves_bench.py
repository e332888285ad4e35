"""Median time of halves-paired ops (rms_norm, swiglu_rows, quantize_q80) at M rows, in this tree."""
import hashlib, sys, time
import numpy as np
import kernels
kernels.init()
from kernels import ops_cpu, kquant_cpu as kq, halves
ops = ops_cpu.NumbaOps()
rng = np.random.default_rng(0)
res = {}
for M in (64, 512):
    x = rng.standard_normal((M, 2048)).astype(np.float32)
    w = rng.standard_normal(2048).astype(np.float32)
    gu = rng.standard_normal((M, 2 * 768)).astype(np.float32)
    g, u = gu[:, :768], gu[:, 768:]
    jobs = {"rms_norm": lambda: ops.rms_norm(x, w, 1e-6), "swiglu": lambda: ops.swiglu_rows(g, u),
            "q80": lambda: kq.quantize_q80(x)}
    for name, f in jobs.items():
        f(); f()
        ts = []
        for _ in range(300):
            t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
        ts.sort()
        res[f"{name}@{M}"] = ts[len(ts) // 2] * 1e6
print(" ".join(f"{k} {v:.0f}us" for k, v in res.items()), "| bytes",
      hashlib.sha256(ops.rms_norm(x, w, 1e-6).tobytes() + ops.swiglu_rows(g, u).tobytes() + kq.quantize_q80(x)[0].tobytes()).hexdigest()[:16])
