"""Attention launch settings (scheduling only) side by side: split thresholds and the span
prefetch, at decode and prefill shapes, as device time of one launch x layers (CUDA-graph
replay), next to the KV-read floor (bytes read / the copy rate measured in the same run).
Also checks that every setting gives the same output bytes.

  PYTHONUNBUFFERED=1 python3 bench/attn_sweep.py
"""
from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import copy_TBps, graph_ms  # noqa: E402
from kernels import attention_cuda as A  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402

P = 16
# name: (hq, kv, hd, layers, [(start, rows)] a chunk each)
CASES = {
    "llama3 b1 L384": (32, 8, 128, 32, [(384, 1)]),
    "llama3 b1 L4096": (32, 8, 128, 32, [(4096, 1)]),
    "llama3 b16 L1024": (32, 8, 128, 32, [(1024, 1)] * 16),
    "llama3 b64 L576": (32, 8, 128, 32, [(576, 1)] * 64),
    "llama3 b128 L576": (32, 8, 128, 32, [(576, 1)] * 128),
    "llama3 prefill 2048": (32, 8, 128, 32, [(0, 2048)]),
    "smollm2 b1 L384": (9, 3, 64, 30, [(384, 1)]),
    "smollm2 b64 L576": (9, 3, 64, 30, [(576, 1)] * 64),
}
SETTINGS = [(512, 512, True), (512, 512, False), (1024, 1024, True), (2048, 2048, True),
            (4096, 4096, True), (1024, 4096, True)]


def main():
    rate = copy_TBps()
    print(f"copy rate {rate:.3f} TB/s (the floor: K and V bytes read once / this)")
    rng = np.random.default_rng(0)
    kept = A.SPLIT_BLOCKS, A.SPLIT_TARGET, A.PREFETCH
    hdr = "case".ljust(22) + "".join(f"{f'{b}/{t}' + ('' if pf else ' nopf'):>14}" for b, t, pf in SETTINGS)
    print(hdr + f"{'floor':>10}  same bytes")
    for name, (hq, kv, hd, layers, chunks_) in CASES.items():
        per = -(-(max(s + n for s, n in chunks_)) // P)
        pages = per * len(chunks_)
        kp = cp.asarray(rng.standard_normal((pages, P, kv, hd), dtype=np.float32) * 0.5)
        kp, vp = as_bf16(kp), as_bf16(kp[::-1].copy())
        chunks = [(tuple(range(i * per, (i + 1) * per)), P, s, range(n), True)
                  for i, (s, n) in enumerate(chunks_)]
        T = sum(n for _, n in chunks_)
        q = cp.asarray(rng.standard_normal((T, hq, hd)).astype(np.float32))
        rmap = A.round_map(chunks, hq // kv)
        # decode rows: each reads its s + 1 keys' K and V once (prefill is compute-bound: no floor)
        decode = all(n == 1 for _, n in chunks_)
        keys = sum(s + 1 for s, _ in chunks_)
        floor = keys * kv * hd * 2 * 2 / (rate * 1e12) * 1e3 * layers if decode else float("nan")
        row, outs = name.ljust(22), []
        for b, t, pf in SETTINGS:
            A.SPLIT_BLOCKS, A.SPLIT_TARGET, A.PREFETCH = b, t, pf
            outs.append(A.cuda_round(q, kp, vp, rmap, 0.088).view(cp.uint16).get())
            ms = graph_ms(lambda: A.cuda_round(q, kp, vp, rmap, 0.088), reps=10, inner=2)
            row += f"{ms * layers:14.3f}"
        same = all(np.array_equal(o, outs[0]) for o in outs[1:])
        print(row + f"{floor:10.3f}  {same}", flush=True)
    A.SPLIT_BLOCKS, A.SPLIT_TARGET, A.PREFETCH = kept


if __name__ == "__main__":
    main()
