"""The norm-fused streaming GEMM (cuda_norm) at one row against its configuration (MT, NT, U)
on smollm2-135m's shapes: the LM head (49,152 x 576) and the layer's qkv, each timed as a
graph replay, bytes compared across configurations, against the weight bytes over the copy
rate. The source of matmul_fused_cuda.NORM_WIDE.
  python3 bench/norm_head_sweep.py"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import copy_TBps, graph_ms  # noqa: E402
from kernels import matmul_fused_cuda as mm  # noqa: E402
from kernels.matmul_packed_cuda import pack  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402

CFGS = [(1, 1, 4), (1, 2, 4), (1, 2, 2), (1, 4, 2), (1, 4, 1), (1, 8, 1), (1, 8, 2)]
bw = copy_TBps()
for N, K in ((49152, 576), (960, 576), (128256, 1024)):
    w = pack(as_bf16(cp.random.standard_normal((N, K), dtype=cp.float32) * 0.05))
    h = cp.random.standard_normal((1, K), dtype=cp.float32)
    xo = cp.random.standard_normal((1, K), dtype=cp.float32)
    nw = as_bf16(cp.random.standard_normal((K,), dtype=cp.float32))
    ref = None
    print(f"N {N} K {K}: weight bytes over copy rate {w.nbytes / bw / 1e9 * 1e3:.1f} us")
    for cfg in CFGS:
        y, _ = mm.cuda_norm(xo, h, nw, 1e-5, w, cfg=cfg)
        same = ref is None or np.array_equal(cp.asnumpy(y), ref)
        ref = cp.asnumpy(y) if ref is None else ref
        t = graph_ms(lambda: mm.cuda_norm(xo, h, nw, 1e-5, w, cfg=cfg), reps=20, inner=4)
        print(f"  cfg {cfg}: {1e3 * t:7.1f} us  bytes equal to the first: {same}", flush=True)
