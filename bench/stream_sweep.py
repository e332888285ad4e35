"""Tuning sweep for the streaming GEMM (M <= 16): loads in flight (U) and K ranges (KSPLIT),
all of one decode step's llama3-8b GEMMs (32 layers + LM head), against the copy rate.
  python3 bench/stream_sweep.py"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import copy_TBps, cuda_ms  # noqa: E402
from bench.gemm_bench import layer_shapes  # noqa: E402
from kernels import matmul_cuda as mm  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402
from server.engine.spec import SHAPES  # noqa: E402

s = SHAPES["llama3-8b"]
shapes = layer_shapes(s) + [(s.vocab, s.d_model)]
ws = [mm.pack(as_bf16(cp.random.standard_normal(sh, dtype=cp.float32) * 0.02)) for sh in shapes]
reps = [s.n_layers] * 4 + [1]
nbytes = sum(w.nbytes * r for w, r in zip(ws, reps))
bw = copy_TBps()
print(f"copy {bw:.2f} TB/s; floor {nbytes / bw / 1e9:.3f} ms")
for M in (1, 8, 16):
    xs = [as_bf16(cp.random.standard_normal((M, w.shape[1]), dtype=cp.float32)) for w in ws]
    for ks in (4, 8):
        for u in (4, 8, 16):
            mm.U, mm.KSPLIT = u, ks
            ms = sum(cuda_ms(lambda: mm.cuda(x, w, force="stream"), reps=7, warm=2) * r
                     for x, w, r in zip(xs, ws, reps))
            print(f"M={M} KSPLIT={ks} U={u}: {ms:.3f} ms, {nbytes / ms / 1e9:.2f} TB/s", flush=True)
mm.U, mm.KSPLIT = 8, 4
