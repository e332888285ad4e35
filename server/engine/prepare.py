"""Turn Hugging Face-named tensors into one shard's weights: the table-driven TP split.

  q_proj [H*hd, d]    rows of this shard's q heads    -> column-parallel
  k/v_proj [KV*hd, d] rows of this shard's kv heads   -> column-parallel
  o_proj [d, H*hd]    columns of this shard's q heads -> row-parallel (all-reduce after)
  gate/up [ff, d]     rows [lo, hi) of ff            -> column-parallel
  down [d, ff]        columns [lo, hi) of ff         -> row-parallel (all-reduce after)
On the CPU every matrix is stored transposed ([in, out]) so the forward is x @ W (numpy);
on the GPU it stays [out, in], the orientation our tensor-core GEMM reads (x @ W^T), and a
tied LM head is then the embedding array itself.
"""
from __future__ import annotations

import numpy as np

from server.engine.model import LayerWeights, ShardWeights
from server.shapes.shard import Shard


def _xp(a):
    """numpy, or cupy when the tensors were made on the device (dummy 8B shapes)."""
    if type(a).__module__.startswith("cupy"):
        import cupy
        return cupy
    return np


def _cat(parts, axis=0):
    return _xp(parts[0]).concatenate(parts, axis=axis)


def _contig(a):
    return _xp(a).ascontiguousarray(a)


def _rows(w: np.ndarray, heads, hd: int) -> np.ndarray:
    return _cat([w[h * hd:(h + 1) * hd] for h in heads], axis=0)


def shard_weights(spec, get, shard: Shard, to_device=lambda a: a, out_in: bool = False) -> ShardWeights:
    """get(name) -> float32 ndarray in HF orientation (lets dummy weights come one at a time).
    out_in: keep matrices [out, in] (the GPU) instead of [in, out] (the CPU)."""
    hd = spec.head_dim
    orient = _contig if out_in else (lambda a: _contig(a.T))
    lo, hi = shard.ff
    layers = []
    for i in range(spec.n_layers):
        p = f"model.layers.{i}."
        wq = _rows(get(p + "self_attn.q_proj.weight"), shard.q_heads, hd)
        wk = _rows(get(p + "self_attn.k_proj.weight"), shard.kv_heads, hd)
        wv = _rows(get(p + "self_attn.v_proj.weight"), shard.kv_heads, hd)
        wqkv = orient(_cat([wq, wk, wv], axis=0))
        bqkv = None
        if spec.qkv_bias:
            bq = _cat([get(p + "self_attn.q_proj.bias")[h * hd:(h + 1) * hd] for h in shard.q_heads])
            bk = _cat([get(p + "self_attn.k_proj.bias")[h * hd:(h + 1) * hd] for h in shard.kv_heads])
            bv = _cat([get(p + "self_attn.v_proj.bias")[h * hd:(h + 1) * hd] for h in shard.kv_heads])
            bqkv = _cat([bq, bk, bv])
        wo_full = get(p + "self_attn.o_proj.weight")
        wo = orient(_cat([wo_full[:, h * hd:(h + 1) * hd] for h in shard.q_heads], axis=1))
        gate = get(p + "mlp.gate_proj.weight")[lo:hi]
        up = get(p + "mlp.up_proj.weight")[lo:hi]
        wgu = orient(_cat([gate, up], axis=0))
        wdown = orient(get(p + "mlp.down_proj.weight")[:, lo:hi])
        layers.append(LayerWeights(
            attn_norm=to_device(get(p + "input_layernorm.weight")),
            wqkv=to_device(wqkv), bqkv=None if bqkv is None else to_device(bqkv),
            q_norm=to_device(get(p + "self_attn.q_norm.weight")) if spec.qk_norm else None,
            k_norm=to_device(get(p + "self_attn.k_norm.weight")) if spec.qk_norm else None,
            wo=to_device(wo), mlp_norm=to_device(get(p + "post_attention_layernorm.weight")),
            wgu=to_device(wgu), wdown=to_device(wdown)))
    embed = get("model.embed_tokens.weight")
    head = embed if spec.tie_embeddings else get("lm_head.weight")
    embed_dev = to_device(embed)
    if out_in and spec.tie_embeddings:
        lm_head = embed_dev                          # [vocab, d] is already [out, in]
    else:
        lm_head = to_device(orient(head))
    return ShardWeights(embed=embed_dev, norm=to_device(get("model.norm.weight")),
                        lm_head=lm_head, layers=layers,
                        nq=shard.n_q, nkv=shard.n_kv, ff=hi - lo)
