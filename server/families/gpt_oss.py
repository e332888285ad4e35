"""The gpt-oss layer (`gptoss`: GGUF arch `gpt-oss`, GptOssForCausalLM).

    h += attn(rmsnorm(h))    q/k/v with biases, o with a bias; attention sinks (a learned
                             logit a head joins the softmax's denominator); layers 0, 2, 4, ...
                             slide (the query at p reads rows max(0, p - W + 1) .. p, W =
                             spec.sliding_window), the others read the whole context; YaRN RoPE
                             (its attention factor folded into the scale: server/engine/model.py)
    x = rmsnorm(h)
    h += sum over the token's 4 chosen experts e (ascending id) of w_e * (down_e(a) + bd_e),
         a = clamped_swiglu(gate_e x + bg_e, up_e x + bu_e)     (kernels/swiglu.clamped)
         the router: logits = x Wr + br, the top 4 logits, a softmax over those 4

Hugging Face's fused experts (gate_up_proj [E, d, 2 ff] with gate and up interleaved column
by column, down_proj [E, ff, d], x @ W) are split at load into the per-expert names below
([out, in], gate = columns 0, 2, 4, ..., up = 1, 3, 5, ...), as llama.cpp's converter splits
them into ffn_gate_exps / ffn_up_exps.

Tensor parallel: heads as the llama attention (the sinks follow their q heads), each expert's
intermediate width split like the MoE family's (gate|up rows and their biases, down columns),
the row-parallel biases (o, down) added on rank 0 only, before the all-reduce. KV: the
layout's window kind (server/shapes/kv_layout.py): the full layers' rows on pages, each
sliding layer's last rows in a ring a stream (kv.is_ring). Pure Python (see server/families).
"""
from __future__ import annotations

from dataclasses import dataclass

from server.families import llama
from server.families.llama import GGUF_ATTENTION, attention_extras, attention_shapes, \
    shard_attention

NAME = "gptoss"
SWIGLU_LIMIT = 7.0    # the clamp of the experts' SwiGLU (config swiglu_limit)
SWIGLU_ALPHA = 1.702  # its sigmoid's slope (config swiglu_alpha)

GGUF_LAYER = {
    **GGUF_ATTENTION,
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "attn_output.bias": "self_attn.o_proj.bias",
    "attn_sinks.weight": "self_attn.sinks",
    "ffn_gate_inp.weight": "mlp.router.weight",
    "ffn_gate_inp.bias": "mlp.router.bias",
}
# GGUF expert tensors -> model.layers.N.mlp.experts.{e}.<suffix>: the 3-D weights
# [n_experts, out, in] and the 2-D biases [n_experts, out]
GGUF_EXPERTS = {
    "ffn_gate_exps.weight": "gate_proj.weight",
    "ffn_up_exps.weight": "up_proj.weight",
    "ffn_down_exps.weight": "down_proj.weight",
    "ffn_gate_exps.bias": "gate_proj.bias",
    "ffn_up_exps.bias": "up_proj.bias",
    "ffn_down_exps.bias": "down_proj.bias",
}


@dataclass
class GptOssLayerWeights:
    attn_norm: object
    wqkv: object
    bqkv: object
    q_norm: object | None
    k_norm: object | None
    wo: object
    bo: object | None           # [d], on rank 0 only (row-parallel)
    sinks: object               # [this shard's q heads] float32
    mlp_norm: object
    router: object              # [d, n_experts] (replicated)
    router_bias: object         # [n_experts]
    experts_gu: list            # per expert: gate|up of this shard's columns
    gu_bias: list               # per expert: [2 ff_shard] gate bias then up bias
    experts_down: list          # per expert: down of this shard's columns
    down_bias: list | None      # per expert: [d], on rank 0 only


def expert_prefix(i: int, e: int) -> str:
    return f"model.layers.{i}.mlp.experts.{e}."


# ------------------------------------------------------------------ tensors and shapes
def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    d, ff, E = spec.d_model, spec.expert_ff, spec.n_experts
    out = attention_shapes(spec, p)
    out.update(attention_extras(spec, p))
    out[p + "self_attn.o_proj.bias"] = (d,)
    out[p + "self_attn.sinks"] = (spec.n_heads,)
    out[p + "mlp.router.weight"] = (E, d)
    out[p + "mlp.router.bias"] = (E,)
    for e in range(E):
        q = expert_prefix(i, e)
        out.update({q + "gate_proj.weight": (ff, d), q + "up_proj.weight": (ff, d),
                    q + "down_proj.weight": (d, ff), q + "gate_proj.bias": (ff,),
                    q + "up_proj.bias": (ff,), q + "down_proj.bias": (d,)})
    return out


def n_params(spec, active: bool = False) -> int:
    d = spec.d_model
    per_expert = 3 * d * spec.expert_ff + 2 * spec.expert_ff + d      # with the experts' biases
    unused = spec.n_layers * (spec.n_experts - spec.n_experts_used) * per_expert
    return llama.count_params(spec, layer_shapes, unused if active else 0)


# ------------------------------------------------------------------ the TP split
def shard_layer(spec, i: int, sp, shard) -> GptOssLayerWeights:
    p = f"model.layers.{i}."
    get, dev = sp.get, sp.dev
    att = shard_attention(spec, p, sp, shard)
    first = shard.rank == 0
    sinks = get(p + "self_attn.sinks")
    lo, hi = shard.expert_ff
    gus, gub, downs, downb = [], [], [], []
    for e in range(spec.n_experts):
        q = expert_prefix(i, e)
        gate = sp.take(get(q + "gate_proj.weight"), lo, hi)
        up = sp.take(get(q + "up_proj.weight"), lo, hi)
        gus.append(sp.dev(sp.orient(sp.cat([gate, up], axis=0, mixed=True))))
        gub.append(dev(sp.cat([get(q + "gate_proj.bias")[lo:hi], get(q + "up_proj.bias")[lo:hi]])))
        downs.append(dev(sp.orient(sp.cols(get(q + "down_proj.weight"), lo, hi, q + "down_proj.weight"))))
        downb.append(dev(get(q + "down_proj.bias")) if first else None)
    return GptOssLayerWeights(
        bo=dev(get(p + "self_attn.o_proj.bias")) if first else None,
        sinks=dev(sp.cat([sinks[h:h + 1] for h in shard.q_heads])),
        router=dev(sp.orient(get(p + "mlp.router.weight"))),
        router_bias=dev(get(p + "mlp.router.bias")),
        experts_gu=sp.experts(gus), gu_bias=gub, experts_down=sp.experts(downs),
        down_bias=downb if first else None, **att)


# ------------------------------------------------------------------ the forward
def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): attention with sinks (and a sliding
    window on its window layers), o's bias, the biased experts."""
    return ("norm", "qkv", "qkv_bias", "sinks_attend", "o", "o_bias", "norm", "moe_biased")


def forward_layer(ops, m, L, li, h, out, r, kv):
    s, w = m.spec, m.w
    hd, nq, nkv = s.head_dim, w.nq, w.nkv
    qkv, h = ops.norm_linear(out, h, L.attn_norm, s.rms_eps, L.wqkv, L.bqkv)
    T = qkv.shape[0]
    att = ops.qkv_attend_sinks(qkv, nq, nkv, hd, r.pos, m.inv, kv.k(li), kv.v(li), r, m.scale,
                               L.sinks, s.window(li), ring=kv.is_ring(li))
    out = ops.linear(att.reshape(T, nq * hd), L.wo, L.bo)      # [T, d] (partial under TP)
    if m.all_reduce is not None:
        out = m.all_reduce(out)
    x, h = ops.add_norm(out, h, L.mlp_norm, s.rms_eps)
    out = ops.moe_biased(x, L.router, L.router_bias, L.experts_gu, L.gu_bias, L.experts_down,
                         L.down_bias, w.expert_ff, m.routing, SWIGLU_LIMIT, SWIGLU_ALPHA)
    if m.all_reduce is not None:
        out = m.all_reduce(out)
    return h, out
