"""Milliseconds of one on-device sampling launch (kernels/sample_cuda.py), 128k vocabulary."""
from __future__ import annotations

import cupy as cp
import numpy as np

from bench.cudatime import Results, cuda_ms
from kernels import sample_cuda

res = Results()
V = 128256
rng = np.random.default_rng(0)
for R in (1, 8, 64):
    x = cp.asarray(rng.standard_normal((R, V)).astype(np.float32) * 3)
    for name, (K, P, M) in {"plain": (0, 1.0, 0.0), "top_k50": (50, 1.0, 0.0),
                            "top_p0.9": (0, 0.9, 0.0), "k50_p0.9_minp0.05": (50, 0.9, 0.05)}.items():
        args = (x, list(range(R)), [0.8] * R, [K] * R, [P] * R, [M] * R, list(range(R)), [0] * R,
                [1] * R)
        res.log(f"rows {R} {name} ms", round(cuda_ms(lambda: sample_cuda.cuda(*args)), 4))
