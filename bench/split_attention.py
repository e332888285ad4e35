"""Attention split over keys: before (SPAN off: one span, the single-pass kernel's bytes)
vs after, on the llama3-8b shape, one GPU. Random bf16 weights made on the device (no
torch); the KV rows of long contexts are random bf16 written straight into the pool (no
prefill), then decode steps run through Model.forward (CUDA graphs), as the server does.

  PYTHONUNBUFFERED=1 python3 bench/split_attention.py --out DIR [--old FILE]

--old: a copy of the pre-split kernels/attention_cuda.py, timed at kernel level beside.
Prints a table last; writes split_results.json to --out.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp

from bench.cudatime import Results, cuda_ms as _cuda_ms  # noqa: E402

from kernels import attention_cuda, rope  # noqa: E402
from kernels.common_cuda import BF16, as_bf16  # noqa: E402
from server.engine.kvstore import KVStore  # noqa: E402
from server.engine.model import LayerWeights, Model, ShardWeights  # noqa: E402
from server.engine.logits import DeviceLogits  # noqa: E402
from server.engine.spec import SHAPES  # noqa: E402

R = Results()
log = R.log
OFF = 1 << 30                      # SPAN off: every row one span


def cuda_ms(fn, reps=20, warm=3):
    return _cuda_ms(fn, reps, warm)


def rand_bf16(shape, std=1.0, mean=0.0):
    return as_bf16(cp.random.standard_normal(shape, dtype=cp.float32) * std + mean)


def model_of(spec):
    d, hd, nq, nkv, ff = spec.d_model, spec.head_dim, spec.n_heads, spec.n_kv_heads, spec.d_ff
    L = [LayerWeights(attn_norm=rand_bf16((d,), 0.02, 1.0), wqkv=rand_bf16(((nq + 2 * nkv) * hd, d), 0.02),
                      bqkv=None, q_norm=None, k_norm=None, wo=rand_bf16((d, nq * hd), 0.02),
                      mlp_norm=rand_bf16((d,), 0.02, 1.0), wgu=rand_bf16((2 * ff, d), 0.02),
                      wdown=rand_bf16((d, ff), 0.02)) for _ in range(spec.n_layers)]
    w = ShardWeights(embed=rand_bf16((spec.vocab, d), 0.02), norm=rand_bf16((d,), 0.02, 1.0),
                     lm_head=rand_bf16((spec.vocab, d), 0.02), layers=L, nq=nq, nkv=nkv, ff=ff)
    inv = cp.asarray(rope.inv_freq(hd, spec.rope_theta, spec.rope_scaling))
    return Model(spec, w, inv, cp)


def store(spec, context, P=16, fill=True):
    kv = KVStore(cp, spec.n_layers, spec.n_kv_heads, spec.head_dim, BF16, paged=True,
                 pages=context // P, page_rows=P, streams=1, context=context)
    if fill:
        for li in range(spec.n_layers):
            kv.K.view(cp.uint16)[li] = rand_bf16(kv.K.shape[1:]).view(cp.uint16)
            kv.V.view(cp.uint16)[li] = rand_bf16(kv.V.shape[1:]).view(cp.uint16)
    return kv


def fresh_graphs(model):
    model.graphs.graphs, model.graphs.kv = {}, None      # kernel settings changed: recapture


def decode_at(model, kv, pos, steps, P=16):
    """ms per decode step (host clock, argmax read back every step) at positions pos.."""
    table = tuple(range(kv.context // P))
    tok = 17
    for _ in range(3):                                    # capture + warm
        lg = model.forward([(table, P, pos, (tok,), True)], kv)
        tok = DeviceLogits(lg).argmax_rows()[0]          # the server's greedy path
        pos += 1
    t0 = time.perf_counter()
    for _ in range(steps):
        lg = model.forward([(table, P, pos, (tok,), True)], kv)
        tok = DeviceLogits(lg).argmax_rows()[0]          # the server's greedy path
        pos += 1
    return 1e3 * (time.perf_counter() - t0) / steps


def bench384(model, spec, P=16):
    """gpu_bench's b1 decode: prompt 128 (prefilled), 256 new tokens, context 1024."""
    kv = store(spec, 1024, P, fill=False)
    table = tuple(range(1024 // P))
    prompt = tuple(int(t) for t in np.random.default_rng(0).integers(0, spec.vocab, 128))
    model.forward([(table, P, 0, prompt, True)], kv)
    cp.cuda.Device().synchronize()
    return decode_at(model, kv, 128, 253, P)


def attn_alone(mod, spec, kv, L, T=1, reps=20):
    """One layer's attention (cuda_round of `mod`) x layers, ms: T rows ending at L-1."""
    P = kv.page_rows
    table = tuple(range(kv.context // P))
    chunk = (table, P, L - T, range(T), True)
    rm = mod.round_map([chunk], spec.n_heads // spec.n_kv_heads)
    q = cp.random.standard_normal((T, spec.n_heads, spec.head_dim), dtype=cp.float32)
    return cuda_ms(lambda: mod.cuda_round(q, kv.k(0), kv.v(0), rm, 0.088), reps=reps) * spec.n_layers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--old", default=None)
    a = ap.parse_args()
    spec = SHAPES["llama3-8b"]
    log("device", cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
    log("span_default", attention_cuda.SPAN)
    default = attention_cuda.SPAN
    old = None
    if a.old and os.path.exists(a.old):
        sp = importlib.util.spec_from_file_location("attention_before", a.old)
        old = importlib.util.module_from_spec(sp)
        sp.loader.exec_module(old)

    # kernel level first (cheap): one layer x 32, b1 decode rows and a 2,048-row prefill
    kv = store(spec, 16384 + 64, fill=False)
    kv.K.view(cp.uint16)[0] = rand_bf16(kv.K.shape[1:]).view(cp.uint16)
    kv.V.view(cp.uint16)[0] = rand_bf16(kv.V.shape[1:]).view(cp.uint16)
    for L, T in ((384, 1), (4096, 1), (16384, 1), (2048, 2048)):
        tag = f"attn_L{L}_T{T}"
        if old is not None:
            log(f"{tag}_before_kernel_ms", attn_alone(old, spec, kv, L, T, 5 if T > 1 else 20))
        for span in ((OFF, 128, 256, 512, 1024) if T == 1 else (OFF, default)):
            for mb in ((3, 4) if span in (OFF, default) else (attention_cuda.MIN_BLOCKS,)):
                attention_cuda.SPAN, attention_cuda.MIN_BLOCKS = span, mb
                name = "off" if span == OFF else str(span)
                log(f"{tag}_span{name}_minb{mb}_ms", attn_alone(attention_cuda, spec, kv, L, T,
                                                                5 if T > 1 else 20))
        attention_cuda.MIN_BLOCKS = 3
    attention_cuda.SPAN = default
    # bytes: the old kernel == SPAN off; split == in-block at SPAN default (same inputs)
    for L, T in ((384, 1), (16384, 1), (2048, 2048), (16384, 40)):
        P = kv.page_rows
        chunk = (tuple(range(kv.context // P)), P, L - T, range(T), True)
        G = spec.n_heads // spec.n_kv_heads
        q = cp.random.standard_normal((T, spec.n_heads, spec.head_dim), dtype=cp.float32)
        got = {}
        for mb in (3, 4):
            attention_cuda.MIN_BLOCKS = mb
            for name, span, force in (("off", OFF, None), ("split", default, True),
                                      ("inblock", default, False)):
                attention_cuda.SPAN, attention_cuda.FORCE_SPLIT = span, force
                rm = attention_cuda.round_map([chunk], G)
                out = attention_cuda.cuda_round(q, kv.k(0), kv.v(0), rm, 0.088)
                got[name + str(mb)] = out.view(cp.uint16).get()
        attention_cuda.MIN_BLOCKS = 3
        got["off"], got["split"], got["inblock"] = got["off3"], got["split3"], got["inblock3"]
        log(f"bytes_L{L}_T{T}_minb3_eq_minb4", all(bool((got[k + "3"] == got[k + "4"]).all())
                                                   for k in ("off", "split", "inblock")))
        if old is not None:
            rm = old.round_map([chunk], G)
            got["old"] = old.cuda_round(q, kv.k(0), kv.v(0), rm, 0.088).view(cp.uint16).get()
            log(f"bytes_L{L}_T{T}_old_eq_spanoff", bool((got["old"] == got["off"]).all()))
        log(f"bytes_L{L}_T{T}_split_eq_inblock", bool((got["split"] == got["inblock"]).all()))
    attention_cuda.SPAN, attention_cuda.FORCE_SPLIT = default, None
    del kv
    cp.get_default_memory_pool().free_all_blocks()

    t0 = time.time()
    model = model_of(spec)
    cp.cuda.Device().synchronize()
    log("weights_s", round(time.time() - t0, 1))
    for span in (OFF, default):
        attention_cuda.SPAN = span
        fresh_graphs(model)
        log(f"e2e_b1_L384_span{'off' if span == OFF else span}_ms_per_step", bench384(model, spec))
    for ctx in (4096, 16384):
        kv = store(spec, ctx + 128)
        for span in (OFF, default):
            attention_cuda.SPAN = span
            fresh_graphs(model)
            log(f"e2e_b1_L{ctx}_span{'off' if span == OFF else span}_ms_per_step",
                decode_at(model, kv, ctx, 40))
        del kv
        fresh_graphs(model)
        cp.get_default_memory_pool().free_all_blocks()
    attention_cuda.SPAN = default
    with open(os.path.join(a.out, "split_results.json"), "w") as f:
        json.dump(R, f, indent=1)
    f = lambda x: "n/a" if x is None else f"{x:.3f}"
    print("\n| what | before (SPAN off) | after (SPAN %d) |" % default)
    print("|---|---|---|")
    for L in (384, 4096, 16384):
        b, n = R.get(f"e2e_b1_L{L}_spanoff_ms_per_step"), R.get(f"e2e_b1_L{L}_span{default}_ms_per_step")
        print(f"| llama3-8b b1 decode at {L}, ms/step | {f(b)} | {f(n)} |")
    for L, T in ((384, 1), (4096, 1), (16384, 1), (2048, 2048)):
        b = R.get(f"attn_L{L}_T{T}_spanoff_minb3_ms")
        n = R.get(f"attn_L{L}_T{T}_span{default}_minb3_ms")
        print(f"| attention alone x32 layers, L {L} T {T}, ms | {f(b)} | {f(n)} |")


if __name__ == "__main__":
    main()
