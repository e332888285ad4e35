"""MoE CPU speed at a real layer shape with its depth cut: Q8_0 random blocks made in memory
(no file), the engine's forward timed at decode (batch 1 and 8) and prefill.

    python3 bench/moe_cpu.py --shape qwen3-30b-a3b --layers 4 [--vocab 151936]

Prints tokens/s per mode and the share of a decode step spent in the MoE op. Random Q8_0
blocks: f16 scales ~ N(0, 1e-3), int8 quants uniform; the speed depends on the shapes only.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402


def q8_blocks(rng, rows, cols):
    from server.engine.weights.blocks import Blocks
    nb = cols // 32
    data = np.empty((rows, nb, 34), np.uint8)
    data[:, :, :2] = (rng.standard_normal((rows, nb, 1)) * 1e-3).astype(np.float16).view(np.uint8)
    data[:, :, 2:] = rng.integers(0, 256, (rows, nb, 32), dtype=np.uint8)
    return Blocks("Q8_0", rows, cols, data.reshape(rows, nb * 34))


def make(spec, seed=0):
    from server.engine.weights.blocks import Blocks
    from server.engine.weights.names import tensor_shapes
    rng = np.random.default_rng(seed)
    out = {}
    for n, shape in tensor_shapes(spec).items():
        if n.endswith("mlp.gate.weight"):          # the router: F32 rows, as the GGUF loader keeps it
            x = (0.02 * rng.standard_normal(shape)).astype(np.float32)
            out[n] = Blocks("F32", *shape, x.view(np.uint8))
        elif len(shape) == 2:
            out[n] = q8_blocks(rng, *shape)
        else:
            out[n] = (1.0 + 0.02 * rng.standard_normal(shape)).astype(np.float32) if n.endswith("norm.weight") \
                else (0.02 * rng.standard_normal(shape)).astype(np.float32)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-30b-a3b")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=0)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--prefill", type=int, default=128)
    args = ap.parse_args()
    from kernels import ops
    from server.engine.engine import Engine
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    from server.shapes.spec import shape
    spec = replace(shape(args.shape), n_layers=args.layers, tie_embeddings=False)
    if args.vocab:
        spec = replace(spec, vocab=args.vocab)
    t0 = time.time()
    w = make(spec)
    eng = Engine(spec, w.__getitem__)
    print(f"{args.shape} x {args.layers} layers, vocab {spec.vocab}: made in {time.time() - t0:.1f} s",
          flush=True)
    moe_t = [0.0]
    inner = ops.moe

    def timed(*a, **k):
        t = time.perf_counter()
        r = inner(*a, **k)
        moe_t[0] += time.perf_counter() - t
        return r
    ops.moe = timed
    B = 8
    ctx = 1024
    eng.apply(PoolStep(True, B * ctx // 16, 16, (eng.page_bytes(16),), B, ctx))
    rng = np.random.default_rng(1)
    for b in (1, 8):
        for s in range(b):
            eng.apply(BeginStep(s, tuple(range(s * ctx // 16, (s + 1) * ctx // 16))))
        prompt = [tuple(int(t) for t in rng.integers(0, spec.vocab, 8)) for _ in range(b)]
        eng.apply(RoundStep(tuple(Chunk(s, 0, prompt[s], True) for s in range(b))))
        eng.apply(RoundStep(tuple(Chunk(s, 8, (1,), True) for s in range(b))))   # warm
        moe_t[0] = 0.0
        t = time.perf_counter()
        for k in range(args.steps):
            eng.apply(RoundStep(tuple(Chunk(s, 9 + k, (1 + k,), True) for s in range(b))))
        dt = time.perf_counter() - t
        print(f"decode b{b}: {b * args.steps / dt:.2f} tok/s ({dt / args.steps * 1e3:.1f} ms a step, "
              f"MoE op {moe_t[0] / dt:.0%})", flush=True)
        for s in range(b):
            eng.apply(EndStep(s))
    eng.apply(BeginStep(0, tuple(range(ctx // 16))))
    p = tuple(int(t) for t in rng.integers(0, spec.vocab, args.prefill))
    moe_t[0] = 0.0
    t = time.perf_counter()
    eng.apply(RoundStep((Chunk(0, 0, p, True),)))
    dt = time.perf_counter() - t
    print(f"prefill {args.prefill}: {args.prefill / dt:.1f} tok/s (MoE op {moe_t[0] / dt:.0%})")


if __name__ == "__main__":
    main()
