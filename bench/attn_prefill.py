"""Prefill attention side by side in one run: our `attend` on one llama3-8b-shaped prompt
(32 q heads, 8 kv heads, hd 128, paged, causal) with its tiles in grid order by most keys
first (what `host_map` makes) and in row order (as before the seventh stop), both checked for
equal bytes, and PyTorch's scaled_dot_product_attention (bf16, causal, its fastest backend: not
batch-invariant, no pages) on the same q, K and V; TFLOP/s counts the causal QK and PV FLOPs
once (4 x hd x T (T + 1) / 2 x heads), our kernel does each product twice (high + rest).

  PYTHONUNBUFFERED=1 python3 bench/attn_prefill.py [--tokens 2048] [--once]
--once: one launch of the sorted order only (for ncu).
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import cuda_ms  # noqa: E402
from kernels import attention_cuda as A  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--once", action="store_true")
    a = ap.parse_args()
    hq, kv, hd, P, T = 32, 8, 128, 16, a.tokens
    rng = np.random.default_rng(0)
    pages = -(-T // P)
    kp = as_bf16(cp.asarray(rng.standard_normal((pages, P, kv, hd), dtype=np.float32)))
    vp = as_bf16(cp.asarray(rng.standard_normal((pages, P, kv, hd), dtype=np.float32)))
    q = cp.asarray(rng.standard_normal((T, hq, hd), dtype=np.float32))
    scale = hd ** -0.5
    chunks = [(tuple(range(pages)), P, 0, range(T), True)]
    t, sl, p, tr, tn = A.host_map(chunks, hq // kv)
    d = cp.asarray
    sorted_map = A.RoundMap(d(t), d(sl), d(p), d(tr), d(tn), P)
    if a.once:
        A.cuda_round(q, kp, vp, sorted_map, scale)
        cp.cuda.Device().synchronize()
        return
    o = np.argsort(tr, kind="stable")
    rows_map = A.RoundMap(d(t), d(sl), d(p), d(tr[o]), d(tn[o]), P)
    flops = 4 * hd * T * (T + 1) / 2 * hq
    res = {}
    for name, m in (("ours, most keys first", sorted_map), ("ours, row order", rows_map)):
        res[name] = A.cuda_round(q, kp, vp, m, scale).view(cp.uint16).get()
        ms = cuda_ms(lambda: A.cuda_round(q, kp, vp, m, scale), reps=20)
        print(f"{name:28s} {ms * 1e3:9.1f} us  {flops / ms / 1e9:7.1f} TFLOP/s  x32 layers {ms * 32:7.2f} ms")
    vals = list(res.values())
    print("same bytes:", all(np.array_equal(vals[0], v) for v in vals[1:]))
    try:
        import torch
        import torch.nn.functional as F
        tq = torch.as_tensor(q, device="cuda").to(torch.bfloat16).transpose(0, 1)[None]
        kk = torch.as_tensor(kp.view(cp.uint16)).view(torch.bfloat16).reshape(pages * P, kv, hd)[:T]
        vv = torch.as_tensor(vp.view(cp.uint16)).view(torch.bfloat16).reshape(pages * P, kv, hd)[:T]
        tk = kk.transpose(0, 1)[None].repeat_interleave(hq // kv, dim=1).contiguous()
        tv = vv.transpose(0, 1)[None].repeat_interleave(hq // kv, dim=1).contiguous()
        f = lambda: F.scaled_dot_product_attention(tq, tk, tv, is_causal=True, scale=scale)
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(20):
            f()
        e.record()
        torch.cuda.synchronize()
        ms = s.elapsed_time(e) / 20
        print(f"{'torch sdpa (bf16, causal)':28s} {ms * 1e3:9.1f} us  {flops / ms / 1e9:7.1f} TFLOP/s  x32 layers {ms * 32:7.2f} ms")
    except Exception as e:  # noqa: BLE001
        print("torch sdpa: not run:", e)


if __name__ == "__main__":
    main()
