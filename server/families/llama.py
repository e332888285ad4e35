"""The dense llama layer (Llama, Mistral, Qwen2 with q/k/v biases, Qwen3 with q/k norms,
SmolLM): attention, then a SwiGLU MLP, each behind an RMSNorm with the residual around it.

    h += attn(rmsnorm(h))         q|k|v column-parallel, o row-parallel + all-reduce
    h += mlp(rmsnorm(h))          gate|up column-parallel, down row-parallel + all-reduce

The attention half (`attention_shapes`, `shard_attention`, `attend`) is shared with the
mixture-of-experts family (server/families/moe.py). Pure Python (see server/families).
"""
from __future__ import annotations

from dataclasses import dataclass

NAME = "llama"

# GGUF tensor suffix (after blk.N.) -> Hugging Face suffix (after model.layers.N.)
GGUF_ATTENTION = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
}
GGUF_MLP = {
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}
GGUF_LAYER = {**GGUF_ATTENTION, "ffn_norm.weight": "post_attention_layernorm.weight", **GGUF_MLP}
GGUF_EXPERTS: dict = {}          # no 3-D expert tensors


@dataclass
class LayerWeights:
    attn_norm: object      # [d]
    # matrices are [in, out] on the CPU (x @ W) and [out, in] on the GPU (x @ W^T):
    # server/engine/prepare.py
    wqkv: object           # [d, (nq + 2 nkv) * hd]
    bqkv: object | None    # [(nq + 2 nkv) * hd]  (Qwen2)
    q_norm: object | None  # [hd] (Qwen3)
    k_norm: object | None
    wo: object             # [nq * hd, d]
    mlp_norm: object       # [d]
    wgu: object            # [d, 2 ff]: gate columns then up columns
    wdown: object          # [ff, d]


# ------------------------------------------------------------------ tensors and shapes
def attention_shapes(spec, p: str) -> dict:
    """The attention half's core: both norms, q, k, v, o (biases and q/k norms: extras)."""
    d, hd = spec.d_model, spec.head_dim
    q, kv = spec.n_heads * hd, spec.n_kv_heads * hd
    return {
        p + "input_layernorm.weight": (d,),
        p + "post_attention_layernorm.weight": (d,),
        p + "self_attn.q_proj.weight": (q, d),
        p + "self_attn.k_proj.weight": (kv, d),
        p + "self_attn.v_proj.weight": (kv, d),
        p + "self_attn.o_proj.weight": (d, q),
    }


def attention_extras(spec, p: str) -> dict:
    hd = spec.head_dim
    q, kv = spec.n_heads * hd, spec.n_kv_heads * hd
    out = {}
    if spec.qkv_bias:
        out[p + "self_attn.q_proj.bias"] = (q,)
        out[p + "self_attn.k_proj.bias"] = (kv,)
        out[p + "self_attn.v_proj.bias"] = (kv,)
    if spec.qk_norm:
        out[p + "self_attn.q_norm.weight"] = (hd,)
        out[p + "self_attn.k_norm.weight"] = (hd,)
    return out


def mlp_shapes(d: int, ff: int, p: str) -> dict:
    return {p + "gate_proj.weight": (ff, d), p + "up_proj.weight": (ff, d),
            p + "down_proj.weight": (d, ff)}


def layer_shapes(spec, i: int) -> dict:
    """Layer i's tensors by Hugging Face name, [out, in]."""
    p = f"model.layers.{i}."
    return {**attention_shapes(spec, p), **mlp_shapes(spec.d_model, spec.d_ff, p + "mlp."),
            **attention_extras(spec, p)}


def _size(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def count_params(spec, shapes_of, inactive: int = 0) -> int:
    """Parameters of a model whose layer i holds shapes_of(spec, i): its layers, the embedding,
    the head unless tied to it, the final norm; less `inactive` (the experts a token skips)."""
    d = spec.d_model
    layers = sum(_size(s) for i in range(spec.n_layers) for s in shapes_of(spec, i).values())
    head = 0 if spec.tie_embeddings else spec.vocab * d
    return layers - inactive + spec.vocab * d + head + d


def n_params(spec, active: bool = False) -> int:
    return count_params(spec, layer_shapes)


# ------------------------------------------------------------------ the TP split
def shard_attention(spec, p: str, sp, shard) -> dict:
    """The attention half of layer p's record, this shard's heads (prepare.Split: sp)."""
    hd, get = spec.head_dim, sp.get
    wq = sp.rows(get(p + "self_attn.q_proj.weight"), shard.q_heads, hd)
    wk = sp.rows(get(p + "self_attn.k_proj.weight"), shard.kv_heads, hd)
    wv = sp.rows(get(p + "self_attn.v_proj.weight"), shard.kv_heads, hd)
    wqkv = sp.orient(sp.cat([wq, wk, wv], axis=0, mixed=True))
    bqkv = None
    if spec.qkv_bias:
        bq = sp.cat([get(p + "self_attn.q_proj.bias")[h * hd:(h + 1) * hd] for h in shard.q_heads])
        bk = sp.cat([get(p + "self_attn.k_proj.bias")[h * hd:(h + 1) * hd] for h in shard.kv_heads])
        bv = sp.cat([get(p + "self_attn.v_proj.bias")[h * hd:(h + 1) * hd] for h in shard.kv_heads])
        bqkv = sp.cat([bq, bk, bv])
    wo = sp.orient(sp.head_cols(get(p + "self_attn.o_proj.weight"), shard.q_heads, hd,
                                p + "self_attn.o_proj.weight"))
    dev = sp.dev
    return dict(
        attn_norm=dev(get(p + "input_layernorm.weight")),
        wqkv=dev(wqkv), bqkv=None if bqkv is None else dev(bqkv),
        q_norm=dev(get(p + "self_attn.q_norm.weight")) if spec.qk_norm else None,
        k_norm=dev(get(p + "self_attn.k_norm.weight")) if spec.qk_norm else None,
        wo=dev(wo), mlp_norm=dev(get(p + "post_attention_layernorm.weight")))


def shard_mlp(p: str, sp, lo: int, hi: int):
    """(gate|up, down) of the SwiGLU MLP under prefix p, intermediate columns [lo, hi)."""
    gate = sp.take(sp.get(p + "gate_proj.weight"), lo, hi)
    up = sp.take(sp.get(p + "up_proj.weight"), lo, hi)
    wgu = sp.orient(sp.cat([gate, up], axis=0, mixed=True))
    wdown = sp.orient(sp.cols(sp.get(p + "down_proj.weight"), lo, hi, p + "down_proj.weight"))
    return sp.dev(wgu), sp.dev(wdown)


def shard_layer(spec, i: int, sp, shard) -> LayerWeights:
    p = f"model.layers.{i}."
    att = shard_attention(spec, p, sp, shard)
    wgu, wdown = shard_mlp(p + "mlp.", sp, *shard.ff)
    return LayerWeights(wgu=wgu, wdown=wdown, **att)


# ------------------------------------------------------------------ the forward
def attention_stages(spec, L) -> tuple:
    """The attention half's stages on the CPU (kernels/forward_cpu.py: STAGE_NAMES names them),
    as `attend` runs them for this layer's weights."""
    return (("norm", "qkv") + (("qkv_bias",) if L.bqkv is not None else ())
            + (("qk_norm",) if L.q_norm is not None else ())
            + (("rope_part",) if spec.rot != spec.head_dim else ()) + ("attend", "o"))


def cpu_stages(spec, L) -> tuple:
    """Layer L's stages as the CPU round runs them, in order (the plain llama layer's are
    kernels/forward_cpu.LAYER): where every one has a fused form (forward_cpu.FORMS) the
    one-call round is composed from them; else op by op (server/engine/model.Model)."""
    return attention_stages(spec, L) + ("norm", "gate_up_swiglu", "down")


def attend(ops, m, L, li, h, out, r, kv):
    """h += out; the attention of layer li over the round -> (its output, partial under
    TP and all-reduced here, h)."""
    s, w = m.spec, m.w
    hd, nq, nkv = s.head_dim, w.nq, w.nkv
    # h += out; qkv = rmsnorm(h) Wqkv   [T, (nq + 2 nkv) hd]
    qkv, h = ops.norm_linear(out, h, L.attn_norm, s.rms_eps, L.wqkv, L.bqkv)
    T = qkv.shape[0]
    norms = None if L.q_norm is None else (L.q_norm, L.k_norm)
    att = ops.qkv_attend(qkv, nq, nkv, hd, r.pos, m.inv, kv.k(li), kv.v(li), r,
                         m.scale, norms, s.rms_eps, rot=s.rot)
    out = ops.linear(att.reshape(T, nq * hd), L.wo)   # [T, d] (partial under TP)
    if m.all_reduce is not None:
        out = m.all_reduce(out)
    return out, h


def forward_layer(ops, m, L, li, h, out, r, kv):
    """Layer li of the round: (h, out) -> (h, out), out the layer's last output (partial
    sums all-reduced), not yet added to h."""
    s = m.spec
    out, h = attend(ops, m, L, li, h, out, r, kv)
    # h += out; act = silu(rmsnorm(h) Wg) * (rmsnorm(h) Wu)   [T, ff]
    act, h = ops.norm_linear(out, h, L.mlp_norm, s.rms_eps, L.wgu, glu_ff=m.w.ff)
    out = ops.linear(act, L.wdown)                     # [T, d] (partial under TP)
    if m.all_reduce is not None:
        out = m.all_reduce(out)
    return h, out
