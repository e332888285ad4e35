"""foldserve's GPU engine on GGUF files, each on its own (issue 17's engine rows, beside
llama-bench in bench/peer_llamacpp.py): weights held (by kind) against the file's tensor bytes,
prefill of 2,048 tokens (ms), and b1 decode at depth 128 (median ms a step over 128 steps,
graph replays), with the floor (tensor bytes / the copy rate measured in this run).

  PYTHONUNBUFFERED=1 python3 bench/quant_engine_bench.py FILE.gguf [FILE.gguf ...]

"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def one(path: str, rate: float, prefill: int, depth: int, steps: int, device: str = "cuda") -> str:
    from server.engine.engine import Engine
    from server.engine.prepare import describe_weight_bytes, weight_bytes
    from server.engine.weights.gguf_loader import load_gguf
    if device == "cuda":
        import cupy as cp
        sync = cp.cuda.Device().synchronize
    else:                                   # a smoke test of this script on the CPU
        sync = lambda: None
    from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
    t0 = time.time()
    loaded = load_gguf(path, progress=False)
    from bench.peer_llamacpp import tensor_bytes
    tb = tensor_bytes(Path(path))                  # the file's own tensor bytes
    e = Engine(loaded.spec, loaded.tensors.__getitem__, device=device)
    held = sum(weight_bytes(e.weights).values())
    P, ctx = 16, prefill + 64
    e.apply(PoolStep(True, 3 * (ctx // P + 4), P, (e.page_bytes(P),), 3, ctx, False))
    rng = np.random.default_rng(0)
    V = loaded.spec.vocab
    print(f"{os.path.basename(path)}: loaded in {time.time() - t0:.0f} s; weights held "
          f"{describe_weight_bytes(e.weights)} ({held / tb:.3f}x the file's tensor bytes "
          f"{tb / 1e9:.3f} GB)", flush=True)
    # prefill: a 2,048-token prompt in one round (warm once on stream 1, timed on stream 0)
    # a stream's table holds exactly the context's pages: a longer one is not a decode round
    # CUDA graphs take (graphs.py), and the step would run eagerly, launch by launch
    pages = lambda s: tuple(range(s * (ctx // P + 4), s * (ctx // P + 4) + ctx // P))
    prompt = tuple(int(t) for t in rng.integers(0, V, prefill))
    e.apply(BeginStep(1, pages(1)))
    e.apply(RoundStep((Chunk(1, 0, prompt),)))
    e.apply(BeginStep(0, pages(0)))
    sync()
    t = time.perf_counter()
    e.apply(RoundStep((Chunk(0, 0, prompt),)))
    sync()
    pf_ms = (time.perf_counter() - t) * 1e3
    # b1 decode from depth `depth` on stream 2
    e.apply(BeginStep(2, pages(2)))
    lg = e.apply(RoundStep((Chunk(2, 0, prompt[:depth]),)))
    pos, ts = depth, []
    for _ in range(steps):
        tok = int(np.argmax(lg[0]))
        sync()
        t = time.perf_counter()
        lg = e.apply(RoundStep((Chunk(2, pos, (tok,)),)))
        sync()
        ts.append((time.perf_counter() - t) * 1e3)
        pos += 1
    ms = float(np.median(ts[8:]))
    g = getattr(e.model, "graphs", None)
    if device == "cuda" and not (g is not None and getattr(g, "graphs", None)):
        print("WARNING: decode ran eagerly (no CUDA graph captured)", flush=True)
    floor = tb / rate * 1e3
    return (f"foldserve {os.path.basename(path):16s} b1 decode at depth {depth}: {ms:.3f} ms/step "
            f"(floor {floor:.3f} ms, {ms / floor:.2f}x); prefill {prefill}: {pf_ms:.1f} ms; "
            f"weights held {held / 1e9:.3f} GB = {held / tb:.3f}x tensor bytes")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--depth", type=int, default=128)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.device == "cuda":
        from bench.cudatime import copy_TBps
        rate = copy_TBps() * 1e12
    else:
        rate = 1e11
    print(f"copy rate {rate / 1e12:.3f} TB/s", flush=True)
    rows = []
    for f in a.files:
        rows.append(one(f, rate, a.prefill, a.depth, a.steps, a.device))
        print(rows[-1], flush=True)
    print("--- foldserve table ---")
    for r in rows:
        print(r)


if __name__ == "__main__":
    main()
