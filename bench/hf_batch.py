"""The peer for the concurrent workload: transformers' continuous batching (`generate_batch`)
on the llama3-8b shape with random bf16 weights, N requests of I random prompt tokens and O
new tokens each, on the same GPU as ours (run it in the same call as bench/multi_gpu.py).

Usage: python3 bench/hf_batch.py [--requests 64 --input-len 512 --output-len 256]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=256)
    a = ap.parse_args()
    import torch
    from transformers import GenerationConfig

    from bench.gpu_bench import hf_model
    from server.shapes.spec import SHAPES
    spec = SHAPES[a.shape]
    m = hf_model(spec, 0)
    m.set_attn_implementation("paged|sdpa") if hasattr(m, "set_attn_implementation") else None       # the paged attention generate_batch is made for
    g = torch.Generator().manual_seed(0)
    prompts = torch.randint(1000, 20000, (a.requests, a.input_len), generator=g).tolist()
    # a paged cache for every request at once (64 x 768 tokens), not most of the card
    cfg = GenerationConfig(max_new_tokens=a.output_len, do_sample=False, eos_token_id=-1,
                           pad_token_id=0, num_blocks=512, block_size=128, max_batch_tokens=4096)
    torch.cuda.synchronize()
    m.generate_batch(inputs=prompts[:2], generation_config=GenerationConfig(
        max_new_tokens=4, do_sample=False, eos_token_id=-1, pad_token_id=0))   # warm-up
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = m.generate_batch(inputs=prompts, generation_config=cfg)
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    n = sum(len(getattr(v, "generated_tokens", [])) for v in out.values()) if isinstance(out, dict) else 0
    n = n or a.requests * a.output_len
    print(json.dumps({"peer": "transformers generate_batch", "shape": a.shape, "requests": a.requests,
                      "input_len": a.input_len, "output_len": a.output_len, "seconds": dt,
                      "output_tokens": n, "output_tokens_per_s": n / dt}))


if __name__ == "__main__":
    main()
