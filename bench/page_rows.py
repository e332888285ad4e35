"""Pick --page-rows by measurement: decode and prefill time on pages of P rows against the
whole-window twin, and the rows a request wastes in its last page, side by side in one run.

Usage: python3 bench/page_rows.py [--model M] [--device cpu|cuda] [--rows 8,16,32,64,128]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402
from server.engine.kvstore import KVStore  # noqa: E402


def timed(engine, kv, table, prow, prompt, steps):
    sync = (lambda: engine.xp.cuda.runtime.deviceSynchronize()) if engine.device == "cuda" else (lambda: None)
    t = time.perf_counter()
    for s in range(0, len(prompt), 256):
        engine.model.forward([(table, prow, s, tuple(prompt[s:s + 256]), True)], kv)
    sync()
    pre = time.perf_counter() - t
    tok, times = 5, []
    for i in range(steps):
        t = time.perf_counter()
        engine.model.forward([(table, prow, len(prompt) + i, (tok,), True)], kv)
        sync()
        times.append(time.perf_counter() - t)
    return pre, sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--rows", default="8,16,32,64,128")
    ap.add_argument("--prompt", type=int, default=1000)
    ap.add_argument("--steps", type=int, default=16)
    a = ap.parse_args()
    eng = open_model(a.model, device=a.device, progress=False).engine
    s = eng.spec
    ctx = a.prompt + a.steps + 1
    prompt = [int(t) for t in np.random.default_rng(0).integers(100, 20000, a.prompt)]
    win = KVStore(eng.xp, s.n_layers, eng.shard.n_kv, s.head_dim, eng.kv_dtype, paged=False,
                  pages=0, page_rows=16, streams=1, context=ctx)
    pre_w, dec_w = timed(eng, win, (0,), ctx, prompt, a.steps)
    rows = [{"page_rows": "window", "prefill_s": pre_w, "decode_ms": dec_w * 1e3}]
    print(f"window: prefill {a.prompt} tokens {pre_w:.2f} s, decode {dec_w * 1e3:.1f} ms/step")
    for P in [int(x) for x in a.rows.split(",")]:
        n = -(-ctx // P)
        kv = KVStore(eng.xp, s.n_layers, eng.shard.n_kv, s.head_dim, eng.kv_dtype, paged=True,
                     pages=n, page_rows=P, streams=1, context=ctx)
        table = tuple(np.random.default_rng(P).permutation(n).tolist())
        pre, dec = timed(eng, kv, table, P, prompt, a.steps)
        waste = (P - 1) / 2          # rows left empty in a request's last page, on average
        rows.append({"page_rows": P, "prefill_s": pre, "decode_ms": dec * 1e3,
                     "prefill_vs_window": pre / pre_w, "decode_vs_window": dec / dec_w,
                     "mean_rows_wasted_per_request": waste})
        print(f"P={P:4d}: prefill {pre:.2f} s ({pre / pre_w:.2f}x window), decode {dec * 1e3:.1f} "
              f"ms/step ({dec / dec_w:.2f}x window), {waste:.1f} rows wasted a request on average")
    print(json.dumps({"model": s.name or a.model, "device": a.device, "prompt": a.prompt, "rows": rows}))


if __name__ == "__main__":
    main()
