"""Our forward alone (no transformers, no torch), as the server runs it: random bf16 weights
made on the device, a paged KV store, decode rounds through CUDA graphs. Quick numbers for
tuning; bench/gpu_bench.py is the side-by-side benchmark with transformers.

  PYTHONUNBUFFERED=1 python3 bench/engine_bench.py [--out DIR] [--what b1,smollm,prefill,b64]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import Results, copy_TBps, cuda_ms  # noqa: E402
from bench.fixtures import bench384, model_of, store  # noqa: E402
from server.engine.logits import DeviceLogits  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402


def weight_bytes(spec) -> int:
    return 2 * (spec.n_params - (0 if spec.tie_embeddings else spec.vocab * spec.d_model))


def static_batch(model, spec, B, prompt=512, new=32, P=16, context=1024):
    """B streams decoding together (graphs), after each prefilled alone: ms per step."""
    from kernels.common_cuda import BF16
    from server.engine.kvstore import KVStore
    kv = KVStore(cp, spec.n_layers, spec.n_kv_heads, spec.head_dim, BF16, paged=True,
                 pages=B * context // P, page_rows=P, streams=B, context=context)
    per = context // P
    tables = [tuple(range(s * per, (s + 1) * per)) for s in range(B)]
    rng = np.random.default_rng(0)
    for s in range(B):
        ids = tuple(int(t) for t in rng.integers(0, spec.vocab, prompt))
        model.forward([(tables[s], P, 0, ids, True)], kv)
    toks, pos = [1] * B, prompt
    for _ in range(2):
        lg = model.forward([(tables[s], P, pos, (toks[s],), True) for s in range(B)], kv)
        toks = DeviceLogits(lg).argmax_rows()                   # the server's greedy path
        pos += 1
    t0 = time.perf_counter()
    for _ in range(new):
        lg = model.forward([(tables[s], P, pos, (toks[s],), True) for s in range(B)], kv)
        toks = DeviceLogits(lg).argmax_rows()                   # the server's greedy path
        pos += 1
    return 1e3 * (time.perf_counter() - t0) / new


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--what", default="b1,smollm,prefill,b64")
    a = ap.parse_args()
    what = set(a.what.split(","))
    R = Results()
    bw = copy_TBps()
    R.log("copy_TBps", bw)
    if "smollm" in what:
        spec = SHAPES["smollm2-135m"]
        m = model_of(spec)
        R.log("smollm2_b1_ms_per_step", bench384(m, spec))
        R.log("smollm2_b1_floor_ms", weight_bytes(spec) / bw / 1e9)
        del m
    spec = SHAPES["llama3-8b"]
    m = model_of(spec)
    if "b1" in what:
        R.log("llama3_b1_ms_per_step", bench384(m, spec))
        R.log("llama3_b1_floor_ms", weight_bytes(spec) / bw / 1e9)
    if "prefill" in what:
        kv = store(spec, 2048, fill=False)
        ids = tuple(int(t) for t in np.random.default_rng(1).integers(0, spec.vocab, 2048))
        table = tuple(range(2048 // 16))
        R.log("llama3_prefill2048_ms", cuda_ms(lambda: m.forward([(table, 16, 0, ids, True)], kv), reps=3, warm=1))
        del kv
    if "b64" in what:
        ms = static_batch(m, spec, 64)
        R.log("llama3_static64_ms_per_step", ms)
        kvb = 64 * 560 * 2 * spec.n_layers * spec.n_kv_heads * spec.head_dim * 2
        R.log("llama3_static64_floor_ms", (weight_bytes(spec) + kvb) / bw / 1e9)
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "engine_bench.json"), "w") as f:
            json.dump(R, f, indent=1)


if __name__ == "__main__":
    main()
