"""The Gated DeltaNet hybrid: Qwen3-Next (HF `Qwen3NextForCausalLM`, GGUF arch `qwen3next`).

Layer i is full attention where (i + 1) % full_attn_every == 0 (every 4th), a Gated DeltaNet
linear-attention layer otherwise; every layer's MLP is the MoE (softmax router, top-k
renormalised) plus a shared expert scaled by sigmoid(x . shared_expert_gate).

    linear:  x = rmsnorm(h)
             q|k|v|z = x in_proj_qkvz;  b|a = x in_proj_ba          column-parallel by heads
             out = gdn(q|k|v, z, b, a; the stream's state and conv window)   kernels/gdn_cpu.py
             h += out_proj(out)                                     row-parallel + all-reduce
    full:    q|gate = x q_proj (per head [q | gate]), k, v;  q, k rmsnormed per head,
             partial RoPE (the first `rot` dims, half-rotation form); attention over pages;
             h += o_proj(attn * sigmoid(gate))
    mlp:     h += moe(x) + sigmoid(x w_seg) * shared(x)

The linear layers write no KV rows: their state and conv window are the stream's fixed part
(the KV layout spec's `fixed`, server/shapes/kv_layout.py), kept in the engine's store a
stream slot, beside the full layers' pages. HF's RMSNorms (input, post-attention, final, q/k
norms) are zero-centred, (1 + w); an HF folder's weights get the 1 added at load
(`spec.zero_centred_norms`), as llama.cpp's converter writes them into a GGUF. The gated norm
of the linear layers is plain w.

Tensor parallel: the linear layers split by k heads (each with its v heads: q, k, v, z, b, a
rows, the conv channels, A_log, dt_bias; out_proj's columns), the full layers as llama's.
Pure Python (see server/families).
"""
from __future__ import annotations

from dataclasses import dataclass

from server.families import llama, moe
from server.families.llama import attention_extras, attention_shapes, mlp_shapes, shard_mlp
from server.shapes.kv_layout import gdn_fixed_part
from server.shapes.shard import linear_heads as _linear_heads

NAME = "qwen3next"
# on the CPU every product against a Q8_0 matrix kept as blocks (dense, head, experts)
# takes x quantized to q8_0 as llama.cpp does
# (kernels/kquant_cpu.Q8_0_DEF; server/engine/model.Model reads this; the list:
# docs/receipts/2026-12-05-q8all/README.md)
Q8_0_X8 = True

# GGUF qwen3next (llama.cpp's names): the tensors that map by name; the linear layers'
# attn_qkv | attn_gate, ssm_a and ssm_conv1d are rebuilt at load into HF's layout
# (server/engine/weights/gguf_qwen3next.py)
GGUF_LAYER: dict = {
    **{k: v for k, v in llama.GGUF_ATTENTION.items() if not k.endswith(".bias")},
    "post_attention_norm.weight": "post_attention_layernorm.weight",
    "ssm_ba.weight": "linear_attn.in_proj_ba.weight",
    "ssm_in.weight": "linear_attn.in_proj_qkvz.weight",     # files before attn_qkv | attn_gate
    "ssm_dt.bias": "linear_attn.dt_bias",
    "ssm_norm.weight": "linear_attn.norm.weight",
    "ssm_out.weight": "linear_attn.out_proj.weight",
    "ffn_gate_inp.weight": "mlp.gate.weight",
    "ffn_gate_shexp.weight": "mlp.shared_expert.gate_proj.weight",
    "ffn_up_shexp.weight": "mlp.shared_expert.up_proj.weight",
    "ffn_down_shexp.weight": "mlp.shared_expert.down_proj.weight",
    "ffn_gate_inp_shexp.weight": "mlp.shared_expert_gate.weight",
}
GGUF_EXPERTS = moe.GGUF_EXPERTS


@dataclass
class NextLayerWeights:
    attn_norm: object
    mlp_norm: object
    linear: bool
    # a full layer: q | k | v | gate columns of this shard's heads
    wqkvg: object | None = None
    q_norm: object | None = None
    k_norm: object | None = None
    wo: object | None = None
    # a linear layer (this shard's k heads and their v heads)
    wqkvz: object | None = None      # [d, q | k | v | z]
    wba: object | None = None        # [d, b | a]
    # where in_proj_qkvz and in_proj_ba are Blocks of one kind: the two as one matrix (one
    # product, x quantized once), wqkvz and wba views of its rows, nqkvz wqkvz's rows
    wqkvzba: object | None = None
    nqkvz: int = 0
    conv_w: object | None = None     # [C, K] float32 (channels q | k | v)
    A_log: object | None = None      # [nv]
    dt_bias: object | None = None    # [nv]
    gnorm: object | None = None      # [dv] the gated norm's weight
    wout: object | None = None       # [nv dv, d]
    nk: int = 0
    # the MoE MLP
    router: object | None = None
    router_bias: object | None = None
    experts_gu: list | None = None
    experts_down: list | None = None
    shared_gu: object | None = None
    shared_down: object | None = None
    shared_gate: object | None = None  # [d, 1]


# ------------------------------------------------------------------ tensors and shapes
def _dims(spec):
    nk, nv, dk, dv = spec.lin_k_heads, spec.lin_v_heads, spec.lin_k_dim, spec.lin_v_dim
    return nk, nv, dk, dv


def linear_shapes(spec, p: str) -> dict:
    nk, nv, dk, dv = _dims(spec)
    d, a = spec.d_model, p + "linear_attn."
    conv = 2 * nk * dk + nv * dv
    return {a + "in_proj_qkvz.weight": (2 * nk * dk + 2 * nv * dv, d),
            a + "in_proj_ba.weight": (2 * nv, d),
            a + "conv1d.weight": (conv, 1, spec.conv_kernel),
            a + "dt_bias": (nv,), a + "A_log": (nv,), a + "norm.weight": (dv,),
            a + "out_proj.weight": (d, nv * dv)}


def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    d, out = spec.d_model, {}
    if spec.is_linear_layer(i):
        out[p + "input_layernorm.weight"] = (d,)
        out[p + "post_attention_layernorm.weight"] = (d,)
        out.update(linear_shapes(spec, p))
    else:
        out.update(attention_shapes(spec, p))
        out[p + "self_attn.q_proj.weight"] = (2 * spec.n_heads * spec.head_dim, d)  # q | gate
        out.update(attention_extras(spec, p))
    out[p + "mlp.gate.weight"] = (spec.n_experts, d)
    for e in range(spec.n_experts):
        out.update(mlp_shapes(d, spec.expert_ff, moe.expert_prefix(i, e)))
    out.update(mlp_shapes(d, spec.shared_ff, p + "mlp.shared_expert."))
    out[p + "mlp.shared_expert_gate.weight"] = (1, d)
    return out


def n_params(spec, active: bool = False) -> int:
    unused = spec.n_layers * (spec.n_experts - spec.n_experts_used) * 3 * spec.d_model * spec.expert_ff
    return llama.count_params(spec, layer_shapes, unused if active else 0)


def linear_heads(spec, shard) -> tuple[int, int]:
    """[lo, hi) of the linear layers' k heads this shard holds (server/shapes/shard.py)."""
    return _linear_heads(spec, shard.tp, shard.rank)


def fixed_part(spec, shard) -> tuple:
    """A stream's fixed part on this shard (server/shapes/kv_layout.py's gdn_fixed_part)."""
    return gdn_fixed_part(spec, shard)


# ------------------------------------------------------------------ the TP split
def _norm(spec, sp, name):
    """A zero-centred RMSNorm weight (HF: 1 + w) as the multiplier."""
    w = sp.get(name)
    return sp.dev(w + 1 if spec.zero_centred_norms else w)


def shard_layer(spec, i: int, sp, shard) -> NextLayerWeights:
    p = f"model.layers.{i}."
    get, dev = sp.get, sp.dev
    rec = dict(attn_norm=_norm(spec, sp, p + "input_layernorm.weight"),
               mlp_norm=_norm(spec, sp, p + "post_attention_layernorm.weight"))
    if spec.is_linear_layer(i):
        nk, nv, dk, dv = _dims(spec)
        lo, hi = linear_heads(spec, shard)
        a = p + "linear_attn."
        t = sp.gdn_linear(get, a, nk, nv, dk, dv, lo, hi)
        r = nv // nk
        wout = sp.head_cols(get(a + "out_proj.weight"), range(lo * r, hi * r), dv,
                            a + "out_proj.weight")
        wq, wb = dev(sp.orient(t.pop("wqkvz"))), dev(sp.orient(t.pop("wba")))
        joined = sp.join_rows(wq, wb)
        if joined is not None:
            rec.update(wqkvzba=joined[0], nqkvz=joined[1].shape[0])
            wq, wb = joined[1:]
        rec.update(linear=True, wqkvz=wq, wba=wb, wout=dev(sp.orient(wout)), nk=hi - lo, **t)
    else:
        hd = spec.head_dim
        wq, wg = sp.gated_q(get(p + "self_attn.q_proj.weight"), spec.n_heads, shard.q_heads, hd)
        wk = sp.rows(get(p + "self_attn.k_proj.weight"), shard.kv_heads, hd)
        wv = sp.rows(get(p + "self_attn.v_proj.weight"), shard.kv_heads, hd)
        wo = sp.head_cols(get(p + "self_attn.o_proj.weight"), shard.q_heads, hd,
                          p + "self_attn.o_proj.weight")
        rec.update(linear=False, wqkvg=dev(sp.orient(sp.cat([wq, wk, wv, wg], mixed=True))),
                   q_norm=_norm(spec, sp, p + "self_attn.q_norm.weight"),
                   k_norm=_norm(spec, sp, p + "self_attn.k_norm.weight"), wo=dev(sp.orient(wo)))
    from dataclasses import replace
    m = moe.shard_moe_mlp(replace(spec, n_shared_experts=0), i, sp, shard)
    sgu, sdown = shard_mlp(p + "mlp.shared_expert.", sp, *shard.shared_ff)
    seg = dev(sp.orient(sp.f32(get(p + "mlp.shared_expert_gate.weight"))))
    m.update(shared_gu=sgu, shared_down=sdown, shared_gate=seg)
    return NextLayerWeights(**m, **rec)


# ------------------------------------------------------------------ the forward
def attend_full(ops, m, L, li, h, out, r, kv):
    s, w = m.spec, m.w
    hd, nq, nkv = s.head_dim, w.nq, w.nkv
    y, h = ops.norm_linear(out, h, L.attn_norm, s.rms_eps, L.wqkvg)
    T, n = y.shape[0], (nq + 2 * nkv) * hd
    ki = s.kv_index(li)
    att = ops.qkv_attend(ops.contiguous(y[:, :n]), nq, nkv, hd, r.pos, m.inv, kv.k(ki),
                         kv.v(ki), r, m.scale, (L.q_norm, L.k_norm), s.rms_eps, rot=s.rot)
    att = att.reshape(T, nq * hd) * ops.sigmoid(y[:, n:])
    o = ops.linear(ops.contiguous(att), L.wo)
    if m.all_reduce is not None:
        o = m.all_reduce(o)
    return o, h


def attend_linear(ops, m, L, li, h, out, r, kv):
    """The Gated DeltaNet layer: each chunk through its stream's fixed part (slot c.slot)."""
    s = m.spec
    x, h = ops.add_norm(out, h, L.attn_norm, s.rms_eps)
    if L.wqkvzba is not None:                  # q | k | v | z | b | a in one product
        y = ops.linear(x, L.wqkvzba)
        qkvz, ba = y[:, :L.nqkvz], y[:, L.nqkvz:]
    else:
        qkvz = ops.linear(x, L.wqkvz)
        ba = ops.linear(x, L.wba)
    fi = li - s.kv_index(li)                   # index among the linear layers
    o = ops.gdn_round(qkvz, ba, L.conv_w, L.A_log, L.dt_bias, L.gnorm, s.rms_eps, L.nk,
                      kv.fixed_of(fi), r, s.name or s.arch, snaps=kv.snaps_of(fi))
    y = ops.linear(o, L.wout)
    if m.all_reduce is not None:
        y = m.all_reduce(y)
    return y, h


def ffn(ops, m, L, h, out):
    """h += out; the routed experts + sigmoid(x w_seg) * shared(x)."""
    s, w = m.spec, m.w
    x, h = ops.add_norm(out, h, L.mlp_norm, s.rms_eps)
    y = ops.moe(x, L.router, None, L.experts_gu, L.experts_down, w.expert_ff, m.routing)
    sh = ops.linear(ops.gate_up_silu(x, L.shared_gu, w.shared_ff), L.shared_down)
    y = y + ops.sigmoid(ops.linear(x, L.shared_gate)) * sh
    if m.all_reduce is not None:
        y = m.all_reduce(y)
    return h, y


def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): a Gated DeltaNet layer or gated full
    attention, then the routed experts beside the gated shared expert."""
    att = (("norm", "qkvz", "ba", "gdn", "out") if L.linear else
           ("norm", "qkvg", "qk_norm") + (("rope_part",) if spec.rot != spec.head_dim else ())
           + ("attend", "gate", "o"))
    return att + ("norm", "moe", "shared_expert", "shared_gate")


def forward_layer(ops, m, L, li, h, out, r, kv):
    if L.linear:
        out, h = attend_linear(ops, m, L, li, h, out, r, kv)
    else:
        out, h = attend_full(ops, m, L, li, h, out, r, kv)
    return ffn(ops, m, L, h, out)
