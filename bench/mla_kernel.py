"""kernels/mla_cpu.round_attend alone on one GLM-4.7-Flash layer's shapes (20 heads, latent
512 + rope 64, nope 192, v 256; W_UK / W_UV as Q8_0 blocks, as a Q8_0 GGUF's are read), timed
in this process: a decode row at 1 and at DEPTH, a 512-row prefill at 0 and at DEPTH - 512.
Runs against any tree whose mla_cpu.round_attend has this signature (PYTHONPATH=TREE), so a
before / after pair is two processes under the same load.

    PYTHONPATH=$PWD python -m bench.mla_kernel [--depth 4096] [--threads 2] [--reps 5]

Prints one JSON line: per case the best and the median wall ms of --reps calls, and the
process CPU ms of the median call's run."""
from __future__ import annotations

import argparse
import json
import time
from types import SimpleNamespace

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--depth", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args(argv)
    import kernels
    kernels.init()
    import numba
    numba.set_num_threads(a.threads)
    from gguf import GGMLQuantizationType as G
    from gguf.quants import quantize

    from kernels import mla_cpu
    H, N, R, C, V, P = 20, 192, 64, 512, 256, 16
    rng = np.random.default_rng(0)
    kv_b = rng.standard_normal((H, N + V, C), dtype=np.float32) / np.float32(np.sqrt(C))
    wk = quantize(np.ascontiguousarray(kv_b[:, :N].transpose(0, 2, 1)).reshape(-1, N), G.Q8_0).reshape(H, C, -1)
    wv = quantize(np.ascontiguousarray(kv_b[:, N:]).reshape(-1, C), G.Q8_0).reshape(H, V, -1)
    norm = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    inv = (1.0 / 10000 ** (np.arange(0, R, 2) / R)).astype(np.float32)
    scale = np.float32(1 / np.sqrt(N + R))
    D = a.depth
    pages = -(-(D + 1) // P)
    pool = np.zeros((pages, P, 1, C + R), np.float32)
    table = tuple(range(pages))

    def rows(start, n):
        return SimpleNamespace(pos=np.arange(start, start + n, dtype=np.int32), spans=[(0, n)],
                               chunks=[SimpleNamespace(table=table, page_rows=P, start=start)])

    def call(start, n):
        q = rng.standard_normal((n, H, N + R), dtype=np.float32)
        ckv = rng.standard_normal((n, C + R), dtype=np.float32)
        return mla_cpu.round_attend(q, ckv, norm, 1e-6, wk, wv, N, pool, rows(start, n), inv, scale)
    for s in range(0, D, 512):                # the context's rows, written once
        call(s, min(512, D - s))
    out = {}
    for name, start, n in (("decode@1", 1, 1), (f"decode@{D}", D, 1), ("prefill512@0", 0, 512),
                           (f"prefill512@{D - 512}", D - 512, 512)):
        call(start, n)
        wall, cpu = [], []
        for _ in range(a.reps if n == 1 else max(1, a.reps // 2)):
            t, c = time.perf_counter(), time.process_time()
            call(start, n)
            wall.append((time.perf_counter() - t) * 1e3)
            cpu.append((time.process_time() - c) * 1e3)
        i = int(np.argsort(wall)[len(wall) // 2])
        out[name] = {"best_ms": round(min(wall), 3), "median_ms": round(wall[i], 3),
                     "cpu_ms": round(cpu[i], 3)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
