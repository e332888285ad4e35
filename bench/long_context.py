"""Long contexts on one GPU (llama3-8b shape, random bf16 weights made on the device), each
number beside its floor in the same run:

  attn        attention alone (one launch, graph-timed, x 32 layers): decode rows at 4k, 32k,
              128k keys (1, 4, 16 rows) against the KV-read floor; prefill chunks of 256 /
              1,024 / 2,048 rows at 30,000 keys as TFLOP/s
  decode      b1 decode steps (CUDA graphs, the server's greedy path) at 32k and 128k:
              ms/step against (weights + KV bytes) / copy rate, and the attention share
  prefill     one 32,000-token prompt in chunks of 2,048 and of 256: TTFT against the
              compute floor (GEMM + causal attention FLOPs / the bf16 matmul rate measured
              here), the attention share (its launches timed alone at each chunk's shape)
  interleave  4 streams decoding while a 32,000-token prompt prefills, rounds built by the
              scheduler's own rule (server/round_build.prefill_take) at several key budgets:
              the decoders' time per token (mean, p50, max) and the prompt's TTFT
  long128     one 131,000-token prompt (chunks of 2,048), then decode steps: TTFT, TPOT
  sweep       decode attention alone at SPLIT_TARGET 512 / 1,024 / 2,048 (blocks aimed at in
              split mode: scheduling only), with the output bytes compared across settings

  PYTHONUNBUFFERED=1 python3 bench/long_context.py [--stages attn,decode,...] [--out DIR]
                                                    [--tree DIR] [--tag NAME]
--tree DIR imports kernels/ and server/ from DIR (another checkout: the code before a change,
timed by this same script in the same call).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--stages", default="attn,decode,prefill,interleave,long128")
ap.add_argument("--out", default=None)
ap.add_argument("--tree", default=None)
ap.add_argument("--tag", default="new")
A = ap.parse_args()
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if A.tree:
    sys.path.insert(0, os.path.abspath(A.tree))

import cupy as cp  # noqa: E402
import numpy as np  # noqa: E402

from bench.cudatime import Results, copy_TBps, cuda_ms, graph_ms  # noqa: E402
from kernels import attention_cuda  # noqa: E402
from kernels.common_cuda import as_bf16  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402

SPEC = SHAPES["llama3-8b"]
L, HQ, KV, HD, P = SPEC.n_layers, SPEC.n_heads, SPEC.n_kv_heads, SPEC.head_dim, 16
KV_ROW = L * 2 * KV * HD * 2                                     # bytes of one position's KV
R = Results()
R.log("tree", A.tree or "this")
R.log("tag", A.tag)
STAGES = set(A.stages.split(","))


def weight_bytes():
    return 2 * (SPEC.n_params - (0 if SPEC.tie_embeddings else SPEC.vocab * SPEC.d_model))


def matmul_TFLOPs():
    a = cp.random.standard_normal((8192, 8192), dtype=cp.float32).astype(cp.float16)
    b = cp.random.standard_normal((8192, 8192), dtype=cp.float32).astype(cp.float16)
    ms = cuda_ms(lambda: a @ b, reps=10, warm=3)
    return 2 * 8192 ** 3 / ms / 1e9


RATE = copy_TBps()
R.log("copy_TBps", RATE)


def pools(rows, spare=8):
    pages = -(-rows // P) + spare
    kp = as_bf16(cp.random.standard_normal((pages, P, KV, HD), dtype=cp.float32))
    vp = as_bf16(cp.random.standard_normal((pages, P, KV, HD), dtype=cp.float32))
    table = tuple(int(t) for t in np.random.default_rng(0).permutation(pages)[:-(-rows // P)])
    return kp, vp, table


def attn_ms(kp, vp, chunks, inner=2):
    T = sum(len(c[3]) for c in chunks)
    q = cp.random.standard_normal((T, HQ, HD), dtype=cp.float32)
    rmap = attention_cuda.round_map(chunks, HQ // KV)
    attention_cuda.cuda_round(q, kp, vp, rmap, 0.088)      # compile; grow what it grows
    return graph_ms(lambda: attention_cuda.cuda_round(q, kp, vp, rmap, 0.088), reps=10, inner=inner)


def attn_flops(start, n):
    """Causal attention FLOPs of n rows from `start`, all layers (QK and PV, 2 each a MAC)."""
    keys = n * start + n * (n + 1) / 2
    return 4 * keys * HD * HQ * L


if "attn" in STAGES:
    big = pools(131072)
    for name, rows, keys in (("b1 4k", 1, 4096), ("b1 32k", 1, 32000), ("b4 32k", 4, 32000),
                             ("b1 128k", 1, 131000), ("b16 128k", 16, 131000)):
        chunks = [(big[2], P, keys, range(1), True) for _ in range(rows)]
        ms = attn_ms(big[0], big[1], chunks) * L
        floor = rows * (keys + 1) * KV_ROW / (RATE * 1e12) * 1e3
        R.log(f"attn {name} ms (x{L} layers)", round(ms, 3))
        R.log(f"attn {name} floor ms", round(floor, 3))
    for n in (256, 1024, 2048):
        ms = attn_ms(big[0], big[1], [(big[2], P, 30000, range(n), True)], inner=1) * L
        R.log(f"attn prefill {n} rows at 30000 ms (x{L})", round(ms, 2))
        R.log(f"attn prefill {n} rows at 30000 TFLOP/s", round(attn_flops(30000, n) / ms / 1e9, 1))
    del big


if "sweep" in STAGES:
    big = pools(131072)
    kept = attention_cuda.SPLIT_TARGET
    for name, rows, keys in (("b1 32k", 1, 32000), ("b4 32k", 4, 32000), ("b1 128k", 1, 131000),
                             ("b16 128k", 16, 131000)):
        chunks = [(big[2], P, keys, range(1), True) for _ in range(rows)]
        q = cp.random.standard_normal((rows, HQ, HD), dtype=cp.float32)
        rmap = attention_cuda.round_map(chunks, HQ // KV)
        outs, row = [], []
        for t in (512, 1024, 2048):
            attention_cuda.SPLIT_TARGET = t
            outs.append(attention_cuda.cuda_round(q, big[0], big[1], rmap, 0.088).view(cp.uint16).get())
            row.append(round(graph_ms(lambda: attention_cuda.cuda_round(q, big[0], big[1], rmap, 0.088),
                                      reps=10, inner=2) * L, 3))
        same = all(np.array_equal(o, outs[0]) for o in outs[1:])
        R.log(f"sweep {name} ms at SPLIT_TARGET 512/1024/2048 (x{L}), same bytes", row + [same])
    attention_cuda.SPLIT_TARGET = kept
    del big


def model():
    from bench.fixtures import model_of
    return model_of(SPEC)


def store(context, streams=1):
    from kernels.common_cuda import BF16
    from server.engine.kvstore import KVStore
    return KVStore(cp, L, KV, HD, BF16, paged=True, pages=streams * context // P, page_rows=P,
                   streams=streams, context=context)


def fill(kv):
    for li in range(L):
        kv.K.view(cp.uint16)[li] = as_bf16(cp.random.standard_normal(kv.K.shape[1:], dtype=cp.float32)).view(cp.uint16)
        kv.V.view(cp.uint16)[li] = as_bf16(cp.random.standard_normal(kv.V.shape[1:], dtype=cp.float32)).view(cp.uint16)


M = None
if STAGES & {"decode", "prefill", "interleave", "long128"}:
    M = model()
    cp.cuda.Device().synchronize()
    from bench.fixtures import decode_at


if "decode" in STAGES:
    for ctx, pos in ((33024, 32000), (131072, 131000)):
        kv = store(ctx)
        fill(kv)
        ms = decode_at(M, kv, pos, 40, P)
        floor = (weight_bytes() + pos * KV_ROW) / (RATE * 1e12) * 1e3
        R.log(f"decode b1 at {pos} ms/step", round(ms, 3))
        R.log(f"decode b1 at {pos} floor ms", round(floor, 3))
        R.log(f"decode b1 at {pos} / floor", round(ms / floor, 3))
        table = tuple(range(ctx // P))
        a = attn_ms(kv.k(0), kv.v(0), [(table, P, pos, range(1), True)]) * L
        R.log(f"decode b1 at {pos} attention ms (alone, x{L})", round(a, 3))
        M.graphs.release()
        del kv
        cp.get_default_memory_pool().free_all_blocks()


def prefill(kv, table, n, chunk, start=0, time_attn=False):
    """Wall ms of prefilling n tokens in chunks (synchronized at the end), and the attention
    launches' own time at each chunk's shape (one layer's launch x L)."""
    ids = np.random.default_rng(1).integers(0, SPEC.vocab, n)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        lg = M.forward([(table, P, start + a, tuple(int(t) for t in ids[a:b]), b == n)], kv)
    tok = int(cp.argmax(lg[0]))
    wall = 1e3 * (time.perf_counter() - t0)
    att = 0.0
    if time_attn:
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            q = cp.random.standard_normal((b - a, HQ, HD), dtype=cp.float32)
            rm = attention_cuda.round_map([(table, P, start + a, range(b - a), True)], HQ // KV)
            att += cuda_ms(lambda: attention_cuda.cuda_round(q, kv.k(0), kv.v(0), rm, 0.088), reps=3, warm=1) * L
    return wall, att, tok


def gemm_flops(n):
    return 2 * (weight_bytes() / 2) * n                          # every weight a MAC a row


if "prefill" in STAGES or "long128" in STAGES:
    MM = matmul_TFLOPs()
    R.log("matmul fp16 8192^3 TFLOP/s (the compute rate)", round(MM, 1))

if "prefill" in STAGES:
    kv = store(33024)
    table = tuple(range(33024 // P))
    prefill(kv, table, 4096, 2048)                                 # warm: compile every shape
    n = 32000
    floor = (gemm_flops(n) + attn_flops(0, n)) / (MM * 1e12) * 1e3
    R.log(f"prefill {n} compute floor ms", round(floor, 1))
    for chunk in (2048, 256):
        wall, att, _ = prefill(kv, table, n, chunk, time_attn=True)
        R.log(f"prefill {n} chunks of {chunk}: TTFT ms", round(wall, 1))
        R.log(f"prefill {n} chunks of {chunk}: attention ms (alone)", round(att, 1))
        R.log(f"prefill {n} chunks of {chunk}: TTFT / floor", round(wall / floor, 2))
    R.log(f"prefill {n} attention TFLOP/s (chunks of 2048, alone)", "see above")
    del kv
    cp.get_default_memory_pool().free_all_blocks()


if "interleave" in STAGES:
    from server.round_build import prefill_take
    nd, dctx, lctx, n = 4, 2048, 33024, 32000
    kv = store(lctx + nd * dctx)
    per = lctx // P
    ltable = tuple(range(per))
    dtables = [tuple(range(per + i * (dctx // P), per + (i + 1) * (dctx // P))) for i in range(nd)]
    for t in dtables:                                        # the decoders' prompts: 1,024 each
        M.forward([(t, P, 0, tuple(range(5, 1029)), True)], kv)
    ids = [int(t) for t in np.random.default_rng(2).integers(0, SPEC.vocab, n)]
    # alone, for reference: 4 decode rows (graphs)
    pos = 1024
    for _ in range(3):
        M.forward([(t, P, pos, (7,), True) for t in dtables], kv)
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for k in range(20):
        lg = M.forward([(t, P, pos + k, (7,), True) for t in dtables], kv)
        int(cp.argmax(lg[0]))
    R.log("interleave: 4 decoders alone, ms/token", round(1e3 * (time.perf_counter() - t0) / 20, 2))
    for chunk, keys in ((2048, None), (256, None), (2048, 16 << 20), (2048, 4 << 20)):
        fed, rounds, times = 0, 0, []
        cp.cuda.Device().synchronize()
        t0 = time.perf_counter()
        while fed < n:
            k = prefill_take(fed, n - fed, min(chunk, 2048 - nd), keys)
            chunks = [(t, P, pos + 20, (7,), True) for t in dtables]
            chunks.append((ltable, P, fed, tuple(ids[fed:fed + k]), fed + k == n))
            r0 = time.perf_counter()
            lg = M.forward(chunks, kv)
            int(cp.argmax(lg[0]))                        # the decoders' tokens, as sampled
            times.append(1e3 * (time.perf_counter() - r0))
            fed += k
            rounds += 1
        ttft = 1e3 * (time.perf_counter() - t0)
        t = np.asarray(times)
        name = f"interleave chunk {chunk} keys {keys}"
        R.log(f"{name}: rounds", rounds)
        R.log(f"{name}: decoders' ms/token mean / p50 / p90 / max",
              [round(float(x), 1) for x in (t.mean(), np.median(t), np.percentile(t, 90), t.max())])
        R.log(f"{name}: the prompt's TTFT ms", round(ttft, 1))
    del kv
    M.graphs.release()
    cp.get_default_memory_pool().free_all_blocks()


if "long128" in STAGES:
    ctx, n = 131072, 131000
    kv = store(ctx)
    table = tuple(range(ctx // P))
    prefill(kv, table, 4096, 2048)
    floor = (gemm_flops(n) + attn_flops(0, n)) / (MM * 1e12) * 1e3
    R.log(f"long128: prompt {n} compute floor ms", round(floor, 1))
    wall, _, tok = prefill(kv, table, n, 2048)
    R.log(f"long128: prompt {n} chunks of 2048: TTFT ms", round(wall, 1))
    ms = decode_at(M, kv, n, 30, P)
    R.log(f"long128: TPOT at {n} ms", round(ms, 3))
    R.log(f"long128: TPOT floor ms", round((weight_bytes() + n * KV_ROW) / (RATE * 1e12) * 1e3, 3))

if A.out:
    os.makedirs(A.out, exist_ok=True)
    with open(os.path.join(A.out, f"long_context_{A.tag}.json"), "w") as f:
        json.dump(R, f, indent=1)
