"""The mixture-of-experts layer: Qwen3-MoE (`qwen3moe`, Qwen3MoeForCausalLM) and GLM-4.5 /
4.7 (`glm4moe`, Glm4MoeForCausalLM).

    h += attn(rmsnorm(h))               the llama family's attention (Qwen3's q/k norms,
                                        GLM's q/k/v biases and partial RoPE: spec.rot)
    x = rmsnorm(h)
    h += sum over the token's chosen experts e (ascending id) of w_e * down_e(swiglu(gate|up_e x))
         + shared(x)                    (GLM: one MLP every token takes)
    the first spec.first_dense_layers layers have the dense MLP instead (GLM)

The router (kernels/moe.py) is replicated on every rank. Tensor parallel splits each
expert's intermediate width like the dense MLP's (gate|up column-parallel, down
row-parallel, one all-reduce of the layer's sum): every rank does 1/tp of every chosen
expert, so a token's cost is even over the ranks whatever the router picks (whole experts a
rank would leave the rank holding most of a token's experts doing most of its work).
Pure Python (see server/families).
"""
from __future__ import annotations

from dataclasses import dataclass

from server.families import llama
from server.families.llama import GGUF_ATTENTION, GGUF_MLP, attention_extras, attention_shapes, \
    attend, mlp_shapes, shard_attention, shard_mlp

NAME = "moe"
# on the CPU every product against a Q8_0 matrix kept as blocks (dense, head, experts)
# takes x quantized to q8_0 as llama.cpp does
# (kernels/kquant_cpu.Q8_0_DEF; server/engine/model.Model reads this; the list:
# docs/receipts/2026-12-05-q8all/README.md)
Q8_0_X8 = True

GGUF_LAYER = {
    **GGUF_ATTENTION,
    "ffn_norm.weight": "post_attention_layernorm.weight",             # qwen3moe
    "post_attention_norm.weight": "post_attention_layernorm.weight",  # glm4moe
    **GGUF_MLP,                                                       # GLM's leading dense layers
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "exp_probs_b.bias": "mlp.gate.e_score_correction_bias",
    "ffn_gate_shexp.weight": "mlp.shared_experts.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_experts.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_experts.down_proj.weight",
}
# 3-D GGUF tensors [n_experts, out, in] -> model.layers.N.mlp.experts.{e}.{proj}.weight
GGUF_EXPERTS = {
    "ffn_gate_exps.weight": "gate_proj",
    "ffn_up_exps.weight": "up_proj",
    "ffn_down_exps.weight": "down_proj",
}


@dataclass
class MoeLayerWeights:
    attn_norm: object
    wqkv: object
    bqkv: object | None
    q_norm: object | None
    k_norm: object | None
    wo: object
    mlp_norm: object
    wgu: object | None = None           # a dense layer's MLP (GLM's leading layers)
    wdown: object | None = None
    router: object | None = None        # [d, n_experts] (replicated)
    router_bias: object | None = None   # [n_experts] selection-only bias (sigmoid router)
    experts_gu: list | None = None      # per expert: gate|up of this shard's columns
    experts_down: list | None = None    # per expert: down of this shard's columns
    shared_gu: object | None = None     # the shared expert (GLM)
    shared_down: object | None = None


def expert_prefix(i: int, e: int) -> str:
    return f"model.layers.{i}.mlp.experts.{e}."


# ------------------------------------------------------------------ tensors and shapes
def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    d = spec.d_model
    out = attention_shapes(spec, p)
    if not spec.is_moe_layer(i):
        out.update(mlp_shapes(d, spec.d_ff, p + "mlp."))
    else:
        out[p + "mlp.gate.weight"] = (spec.n_experts, d)
        if spec.router == "sigmoid":
            out[p + "mlp.gate.e_score_correction_bias"] = (spec.n_experts,)
        for e in range(spec.n_experts):
            out.update(mlp_shapes(d, spec.expert_ff, expert_prefix(i, e)))
        if spec.n_shared_experts:
            out.update(mlp_shapes(d, spec.shared_ff, p + "mlp.shared_experts."))
    out.update(attention_extras(spec, p))
    return out


def unused_expert_params(spec) -> int:
    """The routed experts' parameters a token does not use (gate, up and down of the
    n_experts - n_experts_used it is not routed to, in every MoE layer)."""
    moe_layers = sum(spec.is_moe_layer(i) for i in range(spec.n_layers))
    return moe_layers * (spec.n_experts - spec.n_experts_used) * 3 * spec.d_model * spec.expert_ff


def n_params(spec, active: bool = False) -> int:
    return llama.count_params(spec, layer_shapes, unused_expert_params(spec) if active else 0)


# ------------------------------------------------------------------ the TP split
def shard_layer(spec, i: int, sp, shard) -> MoeLayerWeights:
    p = f"model.layers.{i}."
    att = shard_attention(spec, p, sp, shard)
    if not spec.is_moe_layer(i):
        wgu, wdown = shard_mlp(p + "mlp.", sp, *shard.ff)
        return MoeLayerWeights(wgu=wgu, wdown=wdown, **att)
    return MoeLayerWeights(**shard_moe_mlp(spec, i, sp, shard), **att)


def shard_moe_mlp(spec, i: int, sp, shard) -> dict:
    """The MoE MLP fields of layer i's record (router, experts, shared expert), this shard's."""
    p = f"model.layers.{i}."
    router = sp.dev(sp.orient(sp.get(p + "mlp.gate.weight")))
    bias = sp.dev(sp.get(p + "mlp.gate.e_score_correction_bias")) \
        if spec.router == "sigmoid" else None
    gates, ups, downs = [], [], []
    lo, hi = shard.expert_ff
    for e in range(spec.n_experts):                    # shard_mlp's parts, gate|up not fused
        x = expert_prefix(i, e)
        gates.append(sp.take(sp.get(x + "gate_proj.weight"), lo, hi))
        ups.append(sp.take(sp.get(x + "up_proj.weight"), lo, hi))
        downs.append(sp.dev(sp.orient(sp.cols(sp.get(x + "down_proj.weight"), lo, hi,
                                              x + "down_proj.weight"))))
    sgu = sdown = None
    if spec.n_shared_experts:
        sgu, sdown = shard_mlp(p + "mlp.shared_experts.", sp, *shard.shared_ff)
    # gate and up as the file's two stacks where the CPU reads blocks (sp.experts_gate_up),
    # else fused a expert as shard_mlp fuses them
    gus, downs = sp.experts_gate_up(gates, ups), sp.experts(downs)
    return dict(router=router, router_bias=bias, experts_gu=gus, experts_down=downs,
                shared_gu=sgu, shared_down=sdown)


# ------------------------------------------------------------------ the forward
def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): llama's attention, then the dense MLP
    (a leading dense layer) or the routed experts (+ the shared expert)."""
    if L.router is None:
        return llama.cpu_stages(spec, L)
    return llama.attention_stages(spec, L) + ("norm", "moe") + (
        ("shared_expert",) if L.shared_gu is not None else ())


def forward_layer(ops, m, L, li, h, out, r, kv):
    out, h = attend(ops, m, L, li, h, out, r, kv)
    return ffn(ops, m, L, h, out)


def ffn(ops, m, L, h, out):
    """h += out; the layer's MLP (dense, or routed experts + shared) -> (h, its output)."""
    s, w = m.spec, m.w
    if L.router is None:                               # a leading dense layer
        act, h = ops.norm_linear(out, h, L.mlp_norm, s.rms_eps, L.wgu, glu_ff=w.ff)
        out = ops.linear(act, L.wdown)
    else:
        x, h = ops.add_norm(out, h, L.mlp_norm, s.rms_eps)
        out = ops.moe(x, L.router, L.router_bias, L.experts_gu, L.experts_down, w.expert_ff,
                      m.routing, L.shared_gu, L.shared_down, w.shared_ff)
    if m.all_reduce is not None:                       # [T, d] partial under TP
        out = m.all_reduce(out)
    return h, out
