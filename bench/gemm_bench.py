"""Our batch-invariant GEMMs against plain cuBLAS and the physical limits, in one run.

For the llama3-8b shape's GEMMs (one decode step's worth: 32 layers of qkv, o, gate|up,
down, plus the LM head) at several row counts M: ms for ours (kernels/matmul_cuda.py) and
for one plain cuBLAS GEMM each (fastest, not invariant), against the bandwidth floor
(weight bytes / measured copy rate) and the compute floor (FLOPs / measured cuBLAS rate on
8192^3). Random bf16 weights made on the device; no torch needed.

  python3 bench/gemm_bench.py [--out DIR] [--shape llama3-8b]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import cupy as cp  # noqa: E402

from bench import cublas_ref  # noqa: E402
from bench.cudatime import Results, copy_TBps, cuda_ms, graph_ms  # noqa: E402
from kernels import matmul_cuda, matmul_packed_cuda, matmul_pi_cuda  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402


def layer_shapes(s) -> list:
    """[N, K] of one layer's GEMMs: qkv, o, gate|up, down."""
    d, hd = s.d_model, s.head_dim
    return [((s.n_heads + 2 * s.n_kv_heads) * hd, d), (d, s.n_heads * hd), (2 * s.d_ff, d), (d, s.d_ff)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--rows", default="1,8,16,32,64,128,512,2048")
    a = ap.parse_args()
    R = Results()
    log = R.log
    s = SHAPES[a.shape]
    log("copy_TBps", copy_TBps())
    big = as_bf16(cp.random.standard_normal((8192, 8192), dtype=cp.float32))
    log("cublas_bf16_TFLOPs", 2 * 8192 ** 3 / cuda_ms(lambda: cublas_ref.plain(big, big), reps=5) / 1e9)
    del big
    ws = [as_bf16(cp.random.standard_normal(sh, dtype=cp.float32) * 0.02) for sh in layer_shapes(s)]
    head = as_bf16(cp.random.standard_normal((s.vocab, s.d_model), dtype=cp.float32) * 0.02)
    cublas_ref.keep_plain()
    ws, head = [matmul_packed_cuda.pack(w) for w in ws], matmul_packed_cuda.pack(head)
    wbytes = sum(w.plain.nbytes for w in ws) * s.n_layers + head.plain.nbytes
    flop1 = 2 * wbytes // 2
    log("weight_bytes", wbytes)
    bw, rate = R["copy_TBps"] * 1e12, R["cublas_bf16_TFLOPs"] * 1e12
    rows = []
    for M in (int(x) for x in a.rows.split(",")):
        xs = [as_bf16(cp.random.standard_normal((M, w.shape[1]), dtype=cp.float32)) for w in ws]
        got = {}
        for inv in (True, False):
            cublas_ref.use_cublas(not inv)
            # device time (graph replays): a layer's four GEMMs (416 MB of weights) in a row
            layer = graph_ms(lambda: [matmul_cuda.cuda(x, w) for x, w in zip(xs, ws)], reps=7, inner=2)
            lm = graph_ms(lambda: matmul_cuda.cuda(xs[0], head), reps=5, inner=1)
            got["ours" if inv else "plain"] = layer * s.n_layers + lm
        cublas_ref.use_cublas(False)
        if M >= 512:                                          # each prefill GEMM alone, both
            for name, x, w in zip(("qkv", "o", "gate_up", "down"), xs, ws):
                for inv in (True, False):
                    cublas_ref.use_cublas(not inv)
                    log(f"M{M}_{name}_{'ours' if inv else 'plain'}_ms",
                        graph_ms(lambda: matmul_cuda.cuda(x, w), reps=7, inner=2))
                cublas_ref.use_cublas(False)
                if x.shape[1] % 256 == 0:
                    log(f"M{M}_{name}_x_permute_ms", graph_ms(lambda: matmul_pi_cuda.permute(x), reps=7, inner=2))
        for how in ("stream", "tiled", "split"):              # each kernel forced (same bytes)
            if how == "stream" and M > 128:
                continue
            lay = graph_ms(lambda: [matmul_cuda.cuda(x, w, force=how) for x, w in zip(xs, ws)], reps=5, inner=2)
            log(f"M{M}_{how}_layers_ms", lay * s.n_layers)
        floor = max(wbytes / bw, flop1 * M / rate) * 1e3
        row = dict(M=M, ours_ms=got["ours"], plain_ms=got["plain"], floor_ms=floor,
                   ours_over_floor=got["ours"] / floor, ours_over_plain=got["ours"] / got["plain"],
                   ours_TBps=wbytes / got["ours"] / 1e9, ours_TFLOPs=flop1 * M / got["ours"] / 1e9)
        rows.append(row)
        log(f"M{M}", json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}))
    print(f"\n{'M':>6} {'ours ms':>9} {'cuBLAS ms':>10} {'floor ms':>9} {'ours/floor':>10} {'ours/cuBLAS':>11}")
    for r in rows:
        print(f"{r['M']:>6} {r['ours_ms']:>9.3f} {r['plain_ms']:>10.3f} {r['floor_ms']:>9.3f} "
              f"{r['ours_over_floor']:>10.2f} {r['ours_over_plain']:>11.2f}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "gemm_bench.json"), "w") as f:
            json.dump({**R, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
