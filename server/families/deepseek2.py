"""The multi-head latent attention layer with DeepSeek's MoE MLP: GGUF `deepseek2`
(GLM-4.7-Flash, DeepSeek-V2-Lite/V3-shaped files), HF DeepseekV3ForCausalLM and
Glm4MoeLiteForCausalLM.

    x = rmsnorm(h)
    q   = q_b(rmsnorm(q_a x))  (or plain q x)        [H, N + R]   column-parallel by heads
    ckv = kv_a_mqa x                                  [C + R]      replicated: every rank
    row = [rmsnorm(ckv[:C]) | rope(ckv[C:])]          the token's latent row (KV layout
                                                      spec's `latent` kind), written to pages
    h += o(latent attention(q, rows; kv_b's W_UK, W_UV))   kernels/mla.py, absorbed form;
                                                      o row-parallel + all-reduce
    h += the MoE MLP (server/families/moe.py's: router, experts, shared) or, in the first
         first_dense_layers layers, the dense MLP

Tensor parallel: heads split (q_b's and kv_b's rows, o's columns), the latent replicated
(q_a, kv_a and their norms on every rank), so every rank writes the same rows to the same
page ids and its heads read them. Pure Python (see server/families).
"""
from __future__ import annotations

from dataclasses import dataclass

from server.families import llama, moe
from server.families.llama import mlp_shapes, shard_mlp

NAME = "deepseek2"
# on the CPU every product against a Q8_0 matrix kept as blocks (dense, head, experts;
# not MLA's kv_b halves) takes x quantized to q8_0 as llama.cpp does
# (kernels/kquant_cpu.Q8_0_DEF; server/engine/model.Model reads this; the list:
# docs/receipts/2026-12-05-q8all/README.md)
Q8_0_X8 = True

GGUF_LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "attn_q_a.weight": "self_attn.q_a_proj.weight",
    "attn_q_a_norm.weight": "self_attn.q_a_layernorm.weight",
    "attn_q_b.weight": "self_attn.q_b_proj.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_kv_a_mqa.weight": "self_attn.kv_a_proj_with_mqa.weight",
    "attn_kv_a_norm.weight": "self_attn.kv_a_layernorm.weight",
    "attn_kv_b.weight": "self_attn.kv_b_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    **llama.GGUF_MLP,
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
}
GGUF_EXPERTS = moe.GGUF_EXPERTS
# llama.cpp's converter splits kv_b into these 3-D tensors; the GGUF loader joins them back
# into kv_b_proj [H * (N + V), C] (server/engine/weights/gguf_loader.py)
GGUF_KV_B = ("attn_k_b.weight", "attn_v_b.weight")


@dataclass
class MlaLayerWeights:
    attn_norm: object
    wq_a: object | None        # [d, q_lora] (replicated), None for a plain q
    q_a_norm: object | None    # [q_lora]
    wq: object                 # q_b [q_lora, H_r (N + R)] or plain q [d, H_r (N + R)]
    wkv_a: object              # [d, C + R] (replicated)
    kv_a_norm: object          # [C]
    w_ukt: object              # [H_r, C, N]: kv_b's k rows of this rank's heads, transposed
    w_uv: object               # [H_r, V, C]: kv_b's v rows (both float32, or Q8_0 rows as
                               # the GGUF stores them: prepare.Split.kv_b_heads)
    wo: object                 # [H_r V, d]
    mlp_norm: object
    # q_a and kv_a (both read x) as one matrix where both are Blocks of one kind and width:
    # one product, x quantized once (Split.join_rows); wq_a and wkv_a are then views of its
    # rows, nq_a q_a's rows
    wqkv_a: object | None = None
    nq_a: int = 0
    wgu: object | None = None
    wdown: object | None = None
    router: object | None = None
    router_bias: object | None = None
    experts_gu: list | None = None
    experts_down: list | None = None
    shared_gu: object | None = None
    shared_down: object | None = None


# ------------------------------------------------------------------ tensors and shapes
def attention_shapes(spec, p: str) -> dict:
    d, H = spec.d_model, spec.n_heads
    C, R, N, V = spec.kv_lora_rank, spec.qk_rope_head_dim, spec.qk_nope_head_dim, spec.v_head_dim
    a = p + "self_attn."
    out = {p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,)}
    if spec.q_lora_rank:
        out[a + "q_a_proj.weight"] = (spec.q_lora_rank, d)
        out[a + "q_a_layernorm.weight"] = (spec.q_lora_rank,)
        out[a + "q_b_proj.weight"] = (H * (N + R), spec.q_lora_rank)
    else:
        out[a + "q_proj.weight"] = (H * (N + R), d)
    out[a + "kv_a_proj_with_mqa.weight"] = (C + R, d)
    out[a + "kv_a_layernorm.weight"] = (C,)
    out[a + "kv_b_proj.weight"] = (H * (N + V), C)
    out[a + "o_proj.weight"] = (d, H * V)
    return out


def mlp_part_shapes(spec, i: int, p: str) -> dict:
    d, out = spec.d_model, {}
    if not spec.is_moe_layer(i):
        return mlp_shapes(d, spec.d_ff, p + "mlp.")
    out[p + "mlp.gate.weight"] = (spec.n_experts, d)
    if spec.router == "sigmoid":
        out[p + "mlp.gate.e_score_correction_bias"] = (spec.n_experts,)
    for e in range(spec.n_experts):
        out.update(mlp_shapes(d, spec.expert_ff, moe.expert_prefix(i, e)))
    if spec.n_shared_experts:
        out.update(mlp_shapes(d, spec.shared_ff, p + "mlp.shared_experts."))
    return out


def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    return {**attention_shapes(spec, p), **mlp_part_shapes(spec, i, p)}


def n_params(spec, active: bool = False) -> int:
    return llama.count_params(spec, layer_shapes, moe.unused_expert_params(spec) if active else 0)


# ------------------------------------------------------------------ the TP split
def shard_layer(spec, i: int, sp, shard) -> MlaLayerWeights:
    p = f"model.layers.{i}."
    a = p + "self_attn."
    get, dev, heads = sp.get, sp.dev, shard.q_heads
    N, R, V, C = spec.qk_nope_head_dim, spec.qk_rope_head_dim, spec.v_head_dim, spec.kv_lora_rank
    wkv_a = dev(sp.orient(get(a + "kv_a_proj_with_mqa.weight")))
    joined = {}
    if spec.q_lora_rank:
        wq_a = dev(sp.orient(get(a + "q_a_proj.weight")))
        q_a_norm = dev(get(a + "q_a_layernorm.weight"))
        wq = sp.rows(get(a + "q_b_proj.weight"), heads, N + R)
        j = sp.join_rows(wq_a, wkv_a)
        if j is not None:
            joined = dict(wqkv_a=j[0], nq_a=j[1].rows)
            wq_a, wkv_a = j[1], j[2]
    else:
        wq_a = q_a_norm = None
        wq = sp.rows(get(a + "q_proj.weight"), heads, N + R)
    # kv_b's k rows transposed [H_r, C, N] and v rows [H_r, V, C] of this rank's heads
    w_ukt, w_uv = sp.kv_b_heads(get(a + "kv_b_proj.weight"), spec.n_heads, heads, N, V, C)
    wo = sp.head_cols(get(a + "o_proj.weight"), heads, V, a + "o_proj.weight")
    rec = dict(attn_norm=dev(get(p + "input_layernorm.weight")), wq_a=wq_a, q_a_norm=q_a_norm,
               wq=dev(sp.orient(wq)), wkv_a=wkv_a, **joined,
               kv_a_norm=dev(get(a + "kv_a_layernorm.weight")), w_ukt=w_ukt, w_uv=w_uv,
               wo=dev(sp.orient(wo)), mlp_norm=dev(get(p + "post_attention_layernorm.weight")))
    if not spec.is_moe_layer(i):
        wgu, wdown = shard_mlp(p + "mlp.", sp, *shard.ff)
        return MlaLayerWeights(wgu=wgu, wdown=wdown, **rec)
    m = moe.shard_moe_mlp(spec, i, sp, shard)
    return MlaLayerWeights(**m, **rec)


# ------------------------------------------------------------------ the forward
def attend(ops, m, L, li, h, out, r, kv, inv=None):
    """h += out; the latent attention of layer li (its rows in kv.k(li)) -> (its output,
    all-reduced, h). inv: the RoPE frequencies (None: the model's; kimilinear's NoPE layers
    pass zeros, a rotation by 0 being the identity)."""
    s, H = m.spec, m.w.nq
    x, h = ops.add_norm(out, h, L.attn_norm, s.rms_eps)
    T = x.shape[0]
    if L.wqkv_a is not None:                   # q_a | kv_a in one product (the same bytes)
        y = ops.linear(x, L.wqkv_a)
        qa, ckv = y[:, :L.nq_a], y[:, L.nq_a:]                              # [T, C + R]
        q = ops.linear(ops.rms_norm(qa, L.q_a_norm, s.rms_eps), L.wq)
    else:
        if L.wq_a is not None:
            q = ops.linear(ops.rms_norm(ops.linear(x, L.wq_a), L.q_a_norm, s.rms_eps), L.wq)
        else:
            q = ops.linear(x, L.wq)
        ckv = ops.linear(x, L.wkv_a)                                       # [T, C + R]
    att = ops.mla_attend(q.reshape(T, H, s.head_dim), ckv, L.kv_a_norm, s.rms_eps, L.w_ukt,
                         L.w_uv, s.qk_nope_head_dim, kv.k(li), r,
                         m.inv if inv is None else inv, m.scale)
    o = ops.linear(att, L.wo)                                              # partial under TP
    if m.all_reduce is not None:
        o = m.all_reduce(o)
    return o, h


def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): latent attention (q through its
    low-rank pair where the layer has one), then moe.ffn's (dense or routed experts)."""
    q = ("q_a", "q_a_norm", "q_b") if L.wq_a is not None else ("q",)
    ffn = (("norm", "gate_up_swiglu", "down") if L.router is None else
           ("norm", "moe") + (("shared_expert",) if L.shared_gu is not None else ()))
    return ("norm",) + q + ("kv_a", "mla_attend", "o") + ffn


def forward_layer(ops, m, L, li, h, out, r, kv):
    out, h = attend(ops, m, L, li, h, out, r, kv)
    return moe.ffn(ops, m, L, h, out)
