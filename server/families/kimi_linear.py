"""The Kimi Delta Attention hybrid: Kimi-Linear (HF `KimiLinearForCausalLM`, GGUF arch
`kimi-linear`).

Most layers are Kimi Delta Attention (KDA, linear attention with a per-channel decay), the
others NoPE multi-head latent attention (spec.linear_layers names the KDA ones, or every
full_attn_every-th layer is full); the first first_dense_layers layers' MLP is dense, the
rest the DeepSeek-V3 MoE (sigmoid router with a selection bias, group-limited top-k,
renormalised, times routed_scaling_factor, one shared expert).

    kda:   x = rmsnorm(h)
           q|k|v|b|fa|ga = x [W_q | W_k | W_v | W_b | f_a | g_a]    q, k, v, b by heads
           f = fa f_b;  gate = ga g_b                               (column-parallel), f_a and
                                                                    g_a replicated
           W_q | W_k | W_v kept as the file's blocks (a GGUF's Q8_0, ...: this rank's heads'
           rows taken as bytes, kernels.blocks) are multiplied as stored, b | f_a | g_a (F32
           in llama.cpp's quantized files) beside them as a second product; float32 weights
           (an HF folder, an F32 file) stay one matrix [q | k | v | b | f_a | g_a]
           out = kda(q|k|v, f, b, gate; the stream's state and conv window)  kernels/kda_cpu.py
           h += o_proj(out)                                         row-parallel + all-reduce
    full:  server/families/deepseek2.py's latent attention, reused as it is, with zero RoPE
           frequencies: Kimi-Linear's attention keeps the rope dims of q and k unrotated
           (NoPE), and a rotation by angle 0 is the identity, bit for bit
    mlp:   server/families/moe.py's ffn (dense in the leading layers)

The KDA layers write no KV rows: their states and conv windows are the stream's fixed part
(the KV layout spec's `fixed`, server/shapes/kv_layout.py), split by heads across TP ranks;
the full layers' latent rows are on pages, replicated (as deepseek2). Norms are plain w.

transformers 5.25 saves the checkpoint under Moonshot's names (`block_sparse_moe.` for the
MLP, experts' `w1`/`w3`/`w2`, `q_conv1d`, `A_log` [1, 1, H, 1]); `hf_rename` maps them to
this family's names as the HF loader reads them (server/engine/weights/hf_loader.py).
Pure Python (see server/families).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from server.families import deepseek2, llama, moe
from server.families.llama import shard_mlp
from server.shapes.kv_layout import gdn_fixed_part
from server.shapes.shard import linear_heads as _linear_heads

NAME = "kimilinear"

# llama.cpp's kimi-linear names (src/models/kimi-linear.cpp): deepseek2's, attn_q / attn_k /
# attn_v / attn_output on a KDA layer too, and the ssm_* tensors of the KDA layers
GGUF_LAYER = {
    **deepseek2.GGUF_LAYER,
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "ssm_conv1d_q.weight": "self_attn.q_conv1d.weight",
    "ssm_conv1d_k.weight": "self_attn.k_conv1d.weight",
    "ssm_conv1d_v.weight": "self_attn.v_conv1d.weight",
    "ssm_f_a.weight": "self_attn.f_a_proj.weight",
    "ssm_f_b.weight": "self_attn.f_b_proj.weight",
    "ssm_beta.weight": "self_attn.b_proj.weight",
    "ssm_a": "self_attn.A_log",                     # stored as -exp(A_log): gguf_tensor
    "ssm_dt.bias": "self_attn.dt_bias",
    "ssm_g_a.weight": "self_attn.g_a_proj.weight",
    "ssm_g_b.weight": "self_attn.g_b_proj.weight",
    "ssm_norm.weight": "self_attn.o_norm.weight",
}
GGUF_EXPERTS = moe.GGUF_EXPERTS
GGUF_KV_B = deepseek2.GGUF_KV_B


def gguf_tensor(hf: str, x):
    """A GGUF tensor in the form the HF name holds: the convs' numpy (1, d_inner, 1, K) as
    (d_inner, 1, K); ssm_a (-exp(A_log), as the converter writes it) back to A_log, log(-a):
    within a float32 rounding of the checkpoint's A_log (the decays' exp(A_log) then equal
    -a to an ulp)."""
    if hf.endswith("conv1d.weight") and len(x.shape) == 4:
        return x.reshape(x.shape[1], 1, x.shape[3])
    if hf.endswith(".A_log"):
        return _log_neg(x)
    return x


def _log_neg(x):
    """log(-x) elementwise of a float32 array (pure Python: families import no numpy)."""
    import math
    flat = [math.log(-float(v)) for v in x.reshape(-1)]
    out = x.copy()
    out.reshape(-1)[:] = flat
    return out

_EXPERT = re.compile(r"(model\.layers\.\d+)\.block_sparse_moe\.experts\.(\d+)\.w([123])\.weight")
_W = {"1": "gate_proj", "3": "up_proj", "2": "down_proj"}


def hf_rename(name: str) -> str:
    """A name transformers saves for Kimi-Linear -> this family's (the deepseek2 / moe names
    the shared code reads): block_sparse_moe. -> mlp., experts.{e}.w1 / w3 / w2 -> gate_proj /
    up_proj / down_proj. Other names are kept."""
    m = _EXPERT.fullmatch(name)
    if m:
        return f"{m.group(1)}.mlp.experts.{m.group(2)}.{_W[m.group(3)]}.weight"
    return name.replace(".block_sparse_moe.", ".mlp.")


@dataclass
class KdaLayerWeights:
    attn_norm: object
    mlp_norm: object
    w_in: object          # [d, q | k | v (h D each) | b (h) | f_a (D) | g_a (D)] float32, or
                          # q | k | v alone as the file's blocks (w_bfg then holds the rest)
    wf_b: object          # [D, h D]  the forget gate's second projection, this shard's rows
    wg_b: object          # [D, h D]  the output gate's
    conv_w: object        # [3 h D, K] float32 (channels q | k | v of this shard's heads)
    A_log: object         # [h]
    dt_bias: object       # [h D]
    onorm: object         # [D] the gated norm's weight
    wo: object            # [h D, d]
    heads: int = 0        # h: this shard's KDA heads
    w_bfg: object | None = None   # [d, b (h) | f_a (D) | g_a (D)] where w_in is q | k | v alone
    wgu: object | None = None
    wdown: object | None = None
    router: object | None = None
    router_bias: object | None = None
    experts_gu: list | None = None
    experts_down: list | None = None
    shared_gu: object | None = None
    shared_down: object | None = None


# ------------------------------------------------------------------ tensors and shapes
def kda_shapes(spec, p: str) -> dict:
    d, H, D, K = spec.d_model, spec.lin_k_heads, spec.lin_k_dim, spec.conv_kernel
    a = p + "self_attn."
    out = {p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,)}
    for x in "qkv":
        out[a + f"{x}_proj.weight"] = (H * D, d)
        out[a + f"{x}_conv1d.weight"] = (H * D, 1, K)
    out.update({a + "f_a_proj.weight": (D, d), a + "f_b_proj.weight": (H * D, D),
                a + "dt_bias": (H * D,), a + "A_log": (1, 1, H, 1), a + "b_proj.weight": (H, d),
                a + "g_a_proj.weight": (D, d), a + "g_b_proj.weight": (H * D, D),
                a + "o_norm.weight": (D,), a + "o_proj.weight": (d, H * D)})
    return out


def layer_shapes(spec, i: int) -> dict:
    p = f"model.layers.{i}."
    att = kda_shapes(spec, p) if spec.is_linear_layer(i) else deepseek2.attention_shapes(spec, p)
    return {**att, **deepseek2.mlp_part_shapes(spec, i, p)}


def n_params(spec, active: bool = False) -> int:
    return llama.count_params(spec, layer_shapes, moe.unused_expert_params(spec) if active else 0)


def fixed_part(spec, shard) -> tuple:
    """A stream's fixed part on this shard: state [h, D, D], conv window [K - 1, 3 h D]."""
    return gdn_fixed_part(spec, shard)


# ------------------------------------------------------------------ the TP split
def shard_layer(spec, i: int, sp, shard):
    if not spec.is_linear_layer(i):
        return deepseek2.shard_layer(spec, i, sp, shard)
    p = f"model.layers.{i}."
    a = p + "self_attn."
    D = spec.lin_k_dim
    lo, hi = _linear_heads(spec, shard.tp, shard.rank)
    hs = range(lo, hi)
    f = lambda n: sp.f32(sp.get(a + n))
    rows = lambda n: sp.rows(sp.get(a + n), hs, D)       # as stored: Blocks' rows as bytes
    qkv = [rows(f"{x}_proj.weight") for x in "qkv"]
    bfg = [sp.take(sp.get(a + "b_proj.weight"), lo, hi), sp.get(a + "f_a_proj.weight"),
           sp.get(a + "g_a_proj.weight")]
    if all(sp.is_blocks(w) for w in qkv):                # the file's blocks, multiplied as stored
        w_in, w_bfg = sp.cat(qkv, mixed=True), sp.dev(sp.orient(sp.cat(bfg, mixed=True)))
    else:                                                # float32: one matrix, as before
        w_in, w_bfg = sp.stack([sp.f32(w) for w in qkv + bfg]), None
    conv = sp.stack([f(f"{x}_conv1d.weight")[lo * D:hi * D, 0, :] for x in "qkv"])
    wo = sp.head_cols(sp.get(a + "o_proj.weight"), hs, D, a + "o_proj.weight")
    rec = dict(attn_norm=sp.dev(sp.get(p + "input_layernorm.weight")),
               mlp_norm=sp.dev(sp.get(p + "post_attention_layernorm.weight")),
               w_in=sp.dev(sp.orient(w_in)), w_bfg=w_bfg,
               wf_b=sp.dev(sp.orient(rows("f_b_proj.weight"))),
               wg_b=sp.dev(sp.orient(rows("g_b_proj.weight"))), conv_w=conv,
               A_log=sp.stack([f("A_log").reshape(-1)[lo:hi]]),
               dt_bias=sp.stack([f("dt_bias")[lo * D:hi * D]]), onorm=f("o_norm.weight"),
               wo=sp.dev(sp.orient(wo)), heads=hi - lo)
    if spec.is_moe_layer(i):
        return KdaLayerWeights(**rec, **moe.shard_moe_mlp(spec, i, sp, shard))
    wgu, wdown = shard_mlp(p + "mlp.", sp, *shard.ff)
    return KdaLayerWeights(**rec, wgu=wgu, wdown=wdown)


# ------------------------------------------------------------------ the forward
def attend_kda(ops, m, L, li, h, out, r, kv):
    """The KDA layer: each chunk through its stream's fixed part (slot c.slot)."""
    s = m.spec
    x, h = ops.add_norm(out, h, L.attn_norm, s.rms_eps)
    H, D = L.heads, s.lin_k_dim
    n = 3 * H * D
    if L.w_bfg is None:                        # one float32 matrix [q | k | v | b | f_a | g_a]
        y = ops.linear(x, L.w_in)
        qkv, bfg = y[:, :n], y[:, n:]
    else:                                      # q | k | v as the file's blocks, then the rest
        qkv, bfg = ops.linear(x, L.w_in), ops.linear(x, L.w_bfg)
    f = ops.linear(ops.contiguous(bfg[:, H:H + D]), L.wf_b)
    gate = ops.linear(ops.contiguous(bfg[:, H + D:]), L.wg_b)
    fi = li - s.kv_index(li)                   # index among the KDA layers
    o = ops.kda_round(ops.contiguous(qkv), f, ops.contiguous(bfg[:, :H]), gate,
                      L.conv_w, L.A_log, L.dt_bias, L.onorm, s.rms_eps, kv.fixed_of(fi), r,
                      s.lin_lower_bound, s.name or s.arch, snaps=kv.snaps_of(fi))
    o = ops.linear(o, L.wo)
    if m.all_reduce is not None:
        o = m.all_reduce(o)
    return o, h


def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): a KDA layer, then moe.ffn's (dense or
    routed experts); a full layer is deepseek2's (NoPE latent attention, then the same)."""
    if not isinstance(L, KdaLayerWeights):
        return deepseek2.cpu_stages(spec, L)
    ffn = (("norm", "gate_up_swiglu", "down") if L.router is None else
           ("norm", "moe") + (("shared_expert",) if L.shared_gu is not None else ()))
    return ("norm", "kda_in", "kda", "o") + ffn


def forward_layer(ops, m, L, li, h, out, r, kv):
    if isinstance(L, KdaLayerWeights):
        out, h = attend_kda(ops, m, L, li, h, out, r, kv)
    else:       # NoPE latent attention: deepseek2's, its rows at the full layer's kv index
        out, h = deepseek2.attend(ops, m, L, m.spec.kv_index(li), h, out, r, kv,
                                  inv=m.inv * 0)
    return moe.ffn(ops, m, L, h, out)
