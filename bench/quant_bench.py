"""Quantized GEMMs on llama3-8b's shapes, side by side with the bf16 path, one run (H200).

Prints, all graph-timed (bench/cudatime.graph_ms) on weights of 32 distinct layers (no L2 reuse):
- the copy rate (bytes read + written / s) and so the floor of each weight set (bytes / rate);
- a config sweep of qgemv at M = 1, 16, 64 on the gate|up (28,672 x 4,096) for each type
  (fconv_u's loop, CV = 1, beside the earlier conv_u loop, CV = 0);
- one decode step's GEMMs (32 layers x qkv, o, gate|up, down + the LM head) at M = 1, 16, 64
  for bf16 (matmul_cuda, matmul_packed_cuda.Packed), Q8_0 and a Q4_K_M-like mix (Q4_K; attn_v and ffn_down Q6_K in
  every other layer, the LM head Q6_K; q|k|v then two launches where v is Q6_K), with ms,
  GB/s of weights, and ratio to the floor and to bf16;
- prefill GEMMs at 2,048 rows for 4 layers: bf16 against dequantize-to-Packed + the same GEMM;
- with --engine: the whole forward (bench/fixtures' Model, graphs, paged KV) on device-made
  llama3-8b models, bf16 and quantized: b1 decode ms/step (prompt 128, 253 steps) and a
  2,048-token prefill.
Random planes (codes uniform, scales normal float16 of a weight's size) made on the device.
"""
from __future__ import annotations

import argparse
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, ".")
from bench.cudatime import copy_TBps, graph_ms   # noqa: E402
from kernels import common_cuda as C              # noqa: E402
from kernels import matmul_cuda as MM             # noqa: E402
from kernels.matmul_packed_cuda import Packed      # noqa: E402
from kernels import qmatmul_cuda as Q             # noqa: E402
from kernels.blocks import BLOCK    # noqa: E402

H, KV, F, V, L = 4096, 1024, 14336, 128256, 32


def rand_q(kind: str, N: int, K: int) -> Q.QWeight:
    blk, nb = BLOCK[kind]
    nblk = N * K // blk

    def u8(n):
        return cp.random.randint(0, 2 ** 31, (n + 3) // 4, dtype=cp.int32).view(cp.uint8)[:n]

    def f16(n, s):
        return (cp.random.standard_normal(n, dtype=cp.float32) * s).astype(cp.float16).view(cp.uint8)
    if kind == "Q8_0":
        p = (u8(N * K), None, f16(nblk, 2e-4), None)
    elif kind == "Q4_0":
        p = (u8(N * K // 2), None, f16(nblk, 4e-3), None)
    elif kind == "Q4_1":
        p = (u8(N * K // 2), None, f16(2 * nblk, 4e-3), None)
    elif kind == "Q4_K":
        hd = u8(nblk * 16).reshape(nblk, 16)
        hd[:, :4] = f16(2 * nblk, 1e-3).reshape(nblk, 4)
        p = (u8(N * K // 2), hd, None, None)
    else:
        p = (u8(N * K // 2), u8(N * K // 4), f16(nblk, 2e-5), u8(N * K // 16))
    planes = tuple(None if a is None else a.reshape(N, -1) for a in p)
    return Q.QWeight(kind, N, K, planes)


def rand_bf16(N: int, K: int) -> Packed:
    return Packed(C.as_bf16(cp.random.standard_normal((N, K), dtype=cp.float32) * 0.02))


def model(kind: str):
    """[(qkv, o, gu, down)] x L and the LM head."""
    layers = []
    for i in range(L):
        if kind == "bf16":
            layers.append((rand_bf16(H + 2 * KV, H), rand_bf16(H, H), rand_bf16(2 * F, H), rand_bf16(H, F)))
        elif kind == "Q4_K_M":
            more = i % 2 == 0
            qkv = Q.stack([rand_q("Q4_K", H + KV, H), rand_q("Q6_K" if more else "Q4_K", KV, H)])
            layers.append((qkv, rand_q("Q4_K", H, H), rand_q("Q4_K", 2 * F, H),
                           rand_q("Q6_K" if more else "Q4_K", H, F)))
        else:
            layers.append((rand_q(kind, H + 2 * KV, H), rand_q(kind, H, H), rand_q(kind, 2 * F, H),
                           rand_q(kind, H, F)))
    head = rand_bf16(V, H) if kind == "bf16" else rand_q("Q6_K" if kind == "Q4_K_M" else kind, V, H)
    return layers, head


def engine_model(kind: str):
    """bench/fixtures' device-made llama3-8b Model with its matrices as `model` makes them
    (bf16 Packed or GGUF planes) and the embedding in the same kind (Q4_K for Q4_K_M, as
    llama-quantize writes it); norms bf16. -> (Model, weight bytes)."""
    from bench.fixtures import model_of, rand_bf16
    from kernels import rope
    from server.engine.model import LayerWeights, Model, ShardWeights
    from server.shapes.spec import SHAPES
    spec = SHAPES["llama3-8b"]
    if kind == "bf16":
        return model_of(spec), None
    layers, head = model(kind)
    emb = rand_q("Q4_K" if kind == "Q4_K_M" else kind, V, H)
    lw = [LayerWeights(attn_norm=rand_bf16((H,), 0.02, 1.0), wqkv=qkv, bqkv=None, q_norm=None,
                       k_norm=None, wo=o, mlp_norm=rand_bf16((H,), 0.02, 1.0), wgu=gu, wdown=down)
          for qkv, o, gu, down in layers]
    sw = ShardWeights(embed=emb, norm=rand_bf16((H,), 0.02, 1.0), lm_head=head, layers=lw,
                      nq=spec.n_heads, nkv=spec.n_kv_heads, ff=F)
    inv = cp.asarray(rope.inv_freq(spec.head_dim, spec.rope_theta, spec.rope_scaling))
    return Model(spec, sw, inv, cp), nbytes(layers, head) + emb.nbytes


def engine_rows(kinds, rate):
    """The whole forward as the server runs it (graphs, paged KV): b1 decode ms/step (prompt
    128, 253 steps: gpu_bench's bench384, llama-bench tg256 at depth 128's workload) and a
    2,048-token prefill, bf16 beside the quantized models, one run."""
    from bench.cudatime import cuda_ms
    from bench.fixtures import bench384, store
    from server.shapes.spec import SHAPES
    spec = SHAPES["llama3-8b"]
    rows, base = [], {}
    for kind in kinds:
        m, held = engine_model(kind)
        b1 = bench384(m, spec)
        kv = store(spec, 2048, fill=False)
        ids = tuple(int(t) for t in np.random.default_rng(1).integers(0, spec.vocab, 2048))
        pf = cuda_ms(lambda: m.forward([(tuple(range(2048 // 16)), 16, 0, ids, True)], kv), reps=3, warm=1)
        base.setdefault("b1", b1), base.setdefault("pf", pf)
        fl = f"floor {held / rate * 1e3:.3f} ms ({b1 / (held / rate * 1e3):.2f}x)" if held else ""
        line = (f"engine {kind:7s}: b1 decode {b1:6.3f} ms/step {fl}  {b1 / base['b1']:.3f}x bf16; "
                f"prefill 2048 {pf:7.2f} ms ({pf / base['pf']:.3f}x bf16)")
        print(line, flush=True)
        rows.append(line)
        del m, kv
        cp.get_default_memory_pool().free_all_blocks()
    return rows


def nbytes(layers, head):
    return sum(w.nbytes for ws in layers for w in ws) + head.nbytes


def gemm(x, w):
    return Q.cuda(x, w) if Q.is_quant(w) else MM.cuda(x, w)


def step_fn(layers, head, M):
    xh = C.as_bf16(cp.random.standard_normal((M, H), dtype=cp.float32))
    xf = C.as_bf16(cp.random.standard_normal((M, F), dtype=cp.float32))

    def run():
        for qkv, o, gu, down in layers:
            gemm(xh, qkv), gemm(xh, o), gemm(xh, gu), gemm(xf, down)
        gemm(xh, head)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", default="1,16,64")
    ap.add_argument("--kinds", default="bf16,Q8_0,Q4_K_M")
    ap.add_argument("--sweep", default="Q8_0,Q4_K,Q6_K")
    ap.add_argument("--prefill", type=int, default=2048)
    ap.add_argument("--engine", default="", help="e.g. bf16,Q8_0,Q4_K_M: the whole forward (b1, prefill)")
    a = ap.parse_args()
    t0 = time.time()
    rate = copy_TBps() * 1e12
    print(f"copy rate: {rate / 1e12:.3f} TB/s (bytes read + written)", flush=True)
    table = []

    # config sweep at M = 1, 16, 64 on 8 distinct gate|up matrices (K % 2048 == 0: the group
    # path), (MT, NT, U, PF, CV, MB), each with PF 1 and 0; CV 0: the earlier conv_u loop (the
    # A/B of fconv_u's); the best of each (type, M) becomes qmatmul_cuda.GEMV_CFG_KIND for the steps
    sweeps = {1: [(1, 2, 1, None, 0, 1), (1, 1, 1, None, 1, 1), (1, 2, 1, None, 1, 1),
                  (1, 4, 1, None, 1, 1), (1, 2, 1, None, 1, 3), (1, 1, 1, None, 1, 4)],
              16: [(1, 2, 1, None, 0, 1), (1, 2, 1, None, 1, 1)],
              64: [(4, 2, 1, None, 0, 1), (4, 2, 1, None, 1, 1)]}
    for kind in [k for k in a.sweep.split(",") if k]:
        ws = [rand_q(kind, 2 * F, H) for _ in range(8)]
        b = sum(w.nbytes for w in ws)
        best = []
        for M, cfgs in sweeps.items():
            x = C.as_bf16(cp.random.standard_normal((M, H), dtype=cp.float32))
            out = cp.empty((M, 2 * F), dtype=cp.float32)
            res, top = [], None
            for cfg in cfgs:
                for pf in (1, 0):
                    c4 = cfg[:3] + (pf,) + cfg[4:]
                    ms = graph_ms(lambda: [Q.gemv(x, w, out=out, cfg=c4) for w in ws], reps=10, inner=2)
                    res.append(f"{cfg[:2]} pf{pf} cv{cfg[4]} mb{cfg[5]}: {ms / 8 * 1e3:.1f} us "
                               f"{b / 8 / (ms / 8 * 1e-3) / 1e9:.0f} GB/s")
                    if top is None or ms < top[0]:
                        top = (ms, c4)
            best.append((M,) + top[1])
            print(f"sweep M={M} {kind} 28672x4096 ({b / 8 / 1e6:.1f} MB): " + "; ".join(res), flush=True)
        Q.GEMV_CFG_KIND[kind] = best
        print(f"chosen {kind}: {best}", flush=True)
        del ws

    bf16_ms = {}
    for kind in [k for k in a.kinds.split(",") if k]:
        layers, head = model(kind)
        nb = nbytes(layers, head)
        floor = nb / rate * 1e3
        for M in [int(m) for m in a.rows.split(",")]:
            ms = graph_ms(step_fn(layers, head, M), reps=7, inner=1)
            if kind == "bf16":
                bf16_ms[M] = ms
            vs = f"{ms / bf16_ms[M]:.3f}x bf16" if M in bf16_ms and kind != "bf16" else ""
            line = (f"step GEMMs {kind:7s} M={M:3d}: {ms:7.3f} ms  weights {nb / 1e9:6.2f} GB  "
                    f"{nb / (ms * 1e-3) / 1e9:6.0f} GB/s  floor {floor:6.3f} ms  "
                    f"{ms / floor:5.2f}x floor  {vs}")
            print(line, flush=True)
            table.append(line)
        if kind != "bf16" and 1 in [int(m) for m in a.rows.split(",")]:
            # A/B in the same run: the step at one row with the earlier conv_u loop (CV = 0)
            keep = dict(Q.GEMV_CFG_KIND)
            for k in Q.KIND_ID:
                Q.GEMV_CFG_KIND[k] = [(16, 1, 2, 1, 0, 0, 1)]
            ms0 = graph_ms(step_fn(layers, head, 1), reps=7, inner=1)
            Q.GEMV_CFG_KIND.clear()
            Q.GEMV_CFG_KIND.update(keep)
            line = f"step GEMMs {kind:7s} M=  1 with CV=0 (the conv_u loop): {ms0:7.3f} ms  {ms0 / floor:5.2f}x floor"
            print(line, flush=True)
            table.append(line)
        if a.prefill:
            M = a.prefill
            xh = C.as_bf16(cp.random.standard_normal((M, H), dtype=cp.float32))
            xf = C.as_bf16(cp.random.standard_normal((M, F), dtype=cp.float32))

            def pf():
                for qkv, o, gu, down in layers[:4]:
                    gemm(xh, qkv), gemm(xh, o), gemm(xh, gu), gemm(xf, down)
            ms = graph_ms(pf, reps=5, inner=1) / 4
            if kind == "bf16":
                bf16_ms["pf"] = ms
                vs = ""
            else:
                def dq():
                    for qkv, o, gu, down in layers[:4]:
                        for w in (qkv, o, gu, down):
                            Q.dequant_packed(w, Q.scratch(w.shape[0] * w.shape[1]))
                dms = graph_ms(dq, reps=5, inner=1) / 4
                vs = f"{ms / bf16_ms['pf']:.3f}x bf16 (dequantize alone {dms:.3f} ms a layer)" if "pf" in bf16_ms else ""
            line = f"prefill GEMMs {kind:7s} M={M}: {ms:7.3f} ms a layer  {vs}"
            print(line, flush=True)
            table.append(line)
        del layers, head
        cp.get_default_memory_pool().free_all_blocks()
    if a.engine:
        table += engine_rows([k for k in a.engine.split(",") if k], rate)
    print(f"--- table (copy rate {rate / 1e12:.3f} TB/s, {time.time() - t0:.0f} s) ---")
    for line in table:
        print(line)


if __name__ == "__main__":
    main()
