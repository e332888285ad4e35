"""Fixtures of the GPU benchmarks: a model of random bf16 weights made on the device (no
torch), a one-stream paged KV store, and gpu_bench's batch-1 decode loop (as the server's
greedy path runs it). Used by engine_bench, op_profile, host_probe and the device scripts.
"""
from __future__ import annotations

import time

import cupy as cp
import numpy as np

from kernels import rope
from kernels.common_cuda import BF16, as_bf16
from server.engine.kvstore import KVStore
from server.engine.logits import DeviceLogits
from server.engine.model import LayerWeights, Model, ShardWeights


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
