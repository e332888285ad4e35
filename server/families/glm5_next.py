"""GLM-5.3-Flash (HF `Glm5NextForConditionalGeneration`'s text part; GGUF arch `glm5-next`):
Kimi Delta Attention and sparse NoPE latent attention, a DeepSeek-V3 MoE, mHC streams.

Layer i is KDA where i % 4 != 3 (`spec.linear_layers`), else latent attention whose rows the
DSA indexer picks (kernels/dsa.py: keys pooled in groups of index_kpool, the top
index_topk // index_kpool pools and the tail; a "shared" layer, `spec.index_shared`, reuses
the previous full layer's choice). The first first_dense_layers MLPs are dense, the rest the
MoE (sigmoid router with a selection bias, top-k renormalised, times routed_scaling_factor,
one shared expert), SwiGLU with the gate clamped above and up on both sides at
swiglu_limit. Around every block (attention, then MLP) mHC's hc_mult streams
(kernels/mhc.py): the block reads their `pre`-weighted sum and writes `post` times its output
plus the Sinkhorn-mixed streams; the embedding starts as hc_mult equal streams, the head
reads their mean (then the final norm).

    kda:    server/families/kimi_linear.py's layer (KDA op: kernels/kda.py, the safe gate's
            lower bound spec.lin_lower_bound)
    sparse: q_resid = rmsnorm(q_a x); q = q_b q_resid; row = rmsnorm(kv_a x) (NoPE: C
            values); the indexer's keys and choice; absorbed latent attention over the
            chosen rows (kernels/dsa.py's attend)

Tensors by HF name as transformers 5.25 saves them; the MTP layer (GGUF's NextN block,
`spec.nextn_layers`) is counted in the parameters and its rows in the KV layout; drafting
with it is the drafts issue. Pure Python (see server/families).
"""
from __future__ import annotations

from server.families import deepseek2, llama, moe
from server.families.llama import mlp_shapes

NAME = "glm5next"
FUSED = False

INDEXER = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight",
           "index_kpool_compress_ape", "index_kpool_compress_gate")


# ------------------------------------------------------------------ tensors and shapes
def kda_shapes(spec, p: str) -> dict:
    """A KDA layer as transformers' Glm5NextTextLinearAttention names it (one conv1d over
    q | k | v, the forget gate's own module)."""
    d, H, D, K = spec.d_model, spec.lin_k_heads, spec.lin_k_dim, spec.conv_kernel
    a = p + "self_attn."
    out = {p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,)}
    for x in "qkv":
        out[a + f"{x}_proj.weight"] = (H * D, d)
    out.update({a + "conv1d.weight": (3 * H * D, 1, K),
                a + "forget_gate.f_a_proj.weight": (D, d),
                a + "forget_gate.f_b_proj.weight": (H * D, D),
                a + "forget_gate.dt_bias": (H * D,), a + "forget_gate.A_log": (H,),
                a + "b_proj.weight": (H, d), a + "g_a_proj.weight": (D, d),
                a + "g_b_proj.weight": (H * D, D), a + "o_norm.weight": (D,),
                a + "o_proj.weight": (d, H * D)})
    return out


def indexer_shapes(spec, p: str) -> dict:
    d, Di, Hi = spec.d_model, spec.index_head_dim, spec.index_heads
    a = p + "self_attn.indexer."
    return {a + "wq_b.weight": (Hi * Di, spec.q_lora_rank), a + "wk.weight": (Di, d),
            a + "k_norm.weight": (Di,), a + "k_norm.bias": (Di,),
            a + "weights_proj.weight": (Hi, d),
            a + "index_kpool_compress_ape": (spec.index_kpool, Di),
            a + "index_kpool_compress_gate": (Di, d)}


def hc_shapes(spec, p: str) -> dict:
    N, d = spec.hc_mult, spec.d_model
    m = (2 + N) * N
    out = {}
    for part in ("attn_hc", "ffn_hc"):
        out.update({p + f"{part}.fn": (m, N * d), p + f"{part}.base": (m,),
                    p + f"{part}.scale": (3,)})
    return out


def sparse_shapes(spec, i: int, p: str) -> dict:
    out = deepseek2.attention_shapes(spec, p)
    if i not in spec.index_shared:
        out.update(indexer_shapes(spec, p))
    return out


def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    att = kda_shapes(spec, p) if spec.is_linear_layer(i) else sparse_shapes(spec, i, p)
    return {**att, **deepseek2.mlp_part_shapes(spec, i, p), **hc_shapes(spec, p)}


def mtp_shapes(spec, i: int) -> dict:
    """An MTP (NextN) block after the trunk, as llama.cpp's glm5-next loads it: a sparse
    layer with its own indexer and a MoE MLP (no mHC), plus enorm, hnorm, eh_proj [d, 2d]
    and the shared head's norm."""
    p = f"model.layers.{i}."
    d = spec.d_model
    out = {**deepseek2.attention_shapes(spec, p), **indexer_shapes(spec, p)}
    out.update(mlp_shapes(d, spec.expert_ff, p + "mlp.shared_experts."))
    out[p + "mlp.gate.weight"] = (spec.n_experts, d)
    out[p + "mlp.gate.e_score_correction_bias"] = (spec.n_experts,)
    for e in range(spec.n_experts):
        out.update(mlp_shapes(d, spec.expert_ff, moe.expert_prefix(i, e)))
    out.update({p + "enorm.weight": (d,), p + "hnorm.weight": (d,), p + "eh_proj.weight": (d, 2 * d),
                p + "shared_head.norm.weight": (d,)})
    return out


def _size(shape) -> int:
    k = 1
    for s in shape:
        k *= s
    return k


def n_params(spec, active: bool = False) -> int:
    """The trunk (llama.count_params over layer_shapes) and the MTP blocks; active: less the
    routed experts a token skips (in the MTP blocks too)."""
    inactive = moe.unused_expert_params(spec) if active else 0
    mtp = sum(_size(s) for j in range(spec.nextn_layers)
              for s in mtp_shapes(spec, spec.n_layers + j).values())
    if active:
        mtp -= spec.nextn_layers * (spec.n_experts - spec.n_experts_used) * 3 * spec.d_model \
            * spec.expert_ff
    return llama.count_params(spec, layer_shapes, inactive) + mtp
