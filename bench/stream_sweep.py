"""Tuning sweep for the streaming GEMM: rows a block (MT tiles of 16), column groups a block
(NT groups of 8) and chunks in flight (U), over all of one decode step's llama3-8b GEMMs
(32 layers + LM head) at decode batch sizes, against the copy rate and against the tiled /
split kernels. Prints the best configuration per M last.
  python3 bench/stream_sweep.py [--ms 1,16,32,64,128]"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import copy_TBps, graph_ms  # noqa: E402
from bench.gemm_bench import layer_shapes  # noqa: E402
from kernels import matmul_cuda as mm  # noqa: E402
from kernels.matmul_packed_cuda import pack  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402

CFGS = [(1, 1, 8), (1, 1, 4), (1, 2, 4), (1, 4, 4), (2, 2, 4), (2, 4, 2), (2, 4, 4), (2, 8, 2),
        (4, 2, 2), (4, 4, 2), (4, 4, 1), (4, 8, 1), (8, 2, 1), (8, 4, 1)]

ap = argparse.ArgumentParser()
ap.add_argument("--ms", default="1,16,32,48,64,96,128")
a = ap.parse_args()
s = SHAPES["llama3-8b"]
shapes = layer_shapes(s) + [(s.vocab, s.d_model)]
ws = [pack(as_bf16(cp.random.standard_normal(sh, dtype=cp.float32) * 0.02)) for sh in shapes]
reps = [s.n_layers] * 4 + [1]
nbytes = sum(w.nbytes * r for w, r in zip(ws, reps))
bw = copy_TBps()
print(f"copy {bw:.2f} TB/s; weight-bytes floor {nbytes / bw / 1e9:.3f} ms")
best = {}
for M in (int(m) for m in a.ms.split(",")):
    xs = [as_bf16(cp.random.standard_normal((M, w.shape[1]), dtype=cp.float32)) for w in ws]
    def total(**kw):
        # device time only; a layer's four GEMMs (416 MB) in a row, so no weight stays in L2
        layer = graph_ms(lambda: [mm.cuda(x, w, **kw) for x, w in zip(xs[:4], ws[:4])], reps=5, inner=2)
        return layer * s.n_layers + graph_ms(lambda: mm.cuda(xs[4], ws[4], **kw), reps=5, inner=1)
    for how in ("split", "tiled"):
        print(f"M={M} {how}: {total(force=how):.3f} ms", flush=True)
    for cfg in CFGS:
        if cfg[0] * 16 > max(16, 2 * M):
            continue                                # more than half the rows would be padding
        try:
            ms = total(force="stream", cfg=cfg)
        except Exception as e:                      # e.g. too many registers: skip, say so
            print(f"M={M} stream {cfg}: failed {type(e).__name__}: {str(e)[:80]}", flush=True)
            continue
        print(f"M={M} stream MT,NT,U={cfg}: {ms:.3f} ms, {nbytes / ms / 1e9:.2f} TB/s", flush=True)
        if M not in best or ms < best[M][1]:
            best[M] = (cfg, ms)
for M, (cfg, ms) in best.items():
    print(f"best M={M}: MT,NT,U={cfg} {ms:.3f} ms ({ms / (nbytes / bw / 1e9):.2f}x floor)")
