"""Milliseconds of one on-device sampling launch (kernels/sample_cuda.py, host packing and
upload included) beside the greedy arg-max launch, 128k vocabulary, 1 and 64 rows: plain
sampling, top-k, top-p, all three, penalties + logit bias (300 adjusted tokens a row), and a
grammar bitmask. Prints one line a measurement."""
from __future__ import annotations

import cupy as cp
import numpy as np

from bench.cudatime import Results, cuda_ms
from kernels import argmax_cuda, sample_cuda

res = Results()
V = 128256
rng = np.random.default_rng(0)
adj = np.zeros((300, 4))
adj[:, 0] = rng.choice(V, 300, replace=False)
adj[:, 1] = rng.integers(0, 3, 300)
adj[:, 2] = 1
adj[:8, 3] = -100.0
ok = rng.random(V) < 0.3
words = np.packbits(np.concatenate([ok, np.zeros(-V % 32, bool)]), bitorder="little").view(np.uint32)
for R in (1, 64):
    x = cp.asarray(rng.standard_normal((R, V)).astype(np.float32) * 3)
    res.log(f"rows {R} argmax ms", round(cuda_ms(lambda: argmax_cuda.cuda(x)), 4))
    greedy = dict(temperature=[0.0] * R, top_k=[0] * R, top_p=[1.0] * R, min_p=[0.0] * R,
                  plain=[True] * R)
    cases = {"greedy_in_sampler": greedy,
             "plain": (0, 1.0, 0.0), "top_k50": (50, 1.0, 0.0), "top_p0.95": (0, 0.95, 0.0),
             "k50_p0.95_minp0.05": (50, 0.95, 0.05),
             "p0.95_penalties_bias": dict(top_k=[0] * R, top_p=[0.95] * R, min_p=[0.0] * R,
                                          rep=[1.1] * R, freq=[0.3] * R, adj=[adj] * R),
             "p0.95_grammar_mask": dict(top_k=[0] * R, top_p=[0.95] * R, min_p=[0.0] * R,
                                        mask=[words] * R)}
    for name, c in cases.items():
        kw = c if isinstance(c, dict) else dict(top_k=[c[0]] * R, top_p=[c[1]] * R, min_p=[c[2]] * R)
        kw = {"temperature": [0.8] * R, **kw}
        args = dict(rows=list(range(R)), seed=list(range(R)), salt=[0] * R, step=[1] * R, **kw)
        res.log(f"rows {R} {name} ms", round(cuda_ms(lambda: sample_cuda.cuda(x, **args)), 4))
