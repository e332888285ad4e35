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

from dataclasses import dataclass

from server.families import deepseek2, kimi_linear, llama, moe
from server.families.llama import mlp_shapes

NAME = "glm5next"
# on the CPU every product against a Q8_0 matrix kept as blocks takes x quantized to q8_0 as
# llama.cpp does (kernels/kquant_cpu.Q8_0_DEF; server/engine/model.Model reads this): the
# head, KDA's q | k | v (and b | f_a | g_a, f_b, g_b, o where the file has them Q8_0), the
# sparse layers' q_a, q_b, kv_a, o, the dense MLPs, the routed and shared experts. Float32 x:
# the router (F32), the mHC fn and the DSA indexer (read as float32: sp.f32), the absorbed
# kv_b halves W_UK / W_UV (float32: prepare.Split.kv_b_dense), anything the loader
# dequantized. The list: docs/receipts/2026-12-05-glm5q8/README.md
Q8_0_X8 = True

# llama.cpp's glm5-next names (src/models/glm5-next.cpp, llama-arch.cpp): kimi-linear's KDA
# and deepseek2's latent attention names, the mHC and the indexer's
GGUF_LAYER = {
    **kimi_linear.GGUF_LAYER,
    **{f"{part}_{x}.weight": f"{part}_{x}" for part in ("hc_attn", "hc_ffn")
       for x in ("fn", "base", "scale")},
    "indexer.k_norm.weight": "self_attn.indexer.k_norm.weight",
    "indexer.k_norm.bias": "self_attn.indexer.k_norm.bias",
    "indexer.proj.weight": "self_attn.indexer.weights_proj.weight",
    "indexer.attn_k.weight": "self_attn.indexer.wk.weight",
    "indexer.attn_q_b.weight": "self_attn.indexer.wq_b.weight",
    "indexer_compressor_gate.weight": "self_attn.indexer.index_kpool_compress_gate",
    "indexer_compressor_ape.weight": "self_attn.indexer.index_kpool_compress_ape",
}
GGUF_EXPERTS = moe.GGUF_EXPERTS
GGUF_KV_B = deepseek2.GGUF_KV_B


def gguf_tensor(hf: str, x):
    """kimi-linear's stored forms (convs (1, d_inner, 1, K), ssm_a = -exp(A_log))."""
    return kimi_linear.gguf_tensor(hf, x)


INDEXER = ("wq_b.weight", "wk.weight", "k_norm.weight", "k_norm.bias", "weights_proj.weight",
           "index_kpool_compress_ape", "index_kpool_compress_gate")


# ------------------------------------------------------------------ tensors and shapes
def kda_shapes(spec, p: str) -> dict:
    """A KDA layer as transformers 5.25 saves Glm5NextTextLinearAttention: Kimi-Linear's names
    (q_conv1d / k_conv1d / v_conv1d, f_a_proj, f_b_proj, dt_bias under self_attn), A_log [H]."""
    out = kimi_linear.kda_shapes(spec, p)
    out[p + "self_attn.A_log"] = (spec.lin_k_heads,)
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
    for part in ("hc_attn", "hc_ffn"):
        out.update({p + f"{part}_fn": (m, N * d), p + f"{part}_base": (m,),
                    p + f"{part}_scale": (3,)})
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


# ------------------------------------------------------------------ HF names
def hf_rename(name: str) -> str:
    """Glm5NextForConditionalGeneration's text part -> this family's names:
    model.language_model.X -> model.X (lm_head stays)."""
    return name.replace("model.language_model.", "model.", 1)


def hf_skip(name: str) -> bool:
    """The image part (model.visual.*): not read; a request's image parts are refused by name
    (the text part is what foldserve serves)."""
    return name.startswith("model.visual.")


# ------------------------------------------------------------------ the TP split
@dataclass
class Hc:
    fn_t: object          # [N d, (2 + N) N] float32 (fn transposed)
    base: object          # [(2 + N) N]
    scale: object         # [3]


@dataclass
class Indexer:
    wq_t: object          # [q_lora, Hi Di]
    wk_t: object          # [d, Di]
    ln_w: object
    ln_b: object
    wproj_t: object       # [d, Hi]
    ape: object           # [kpool, Di]
    gate_t: object        # [d, Di]
    pooled: int           # its index among the layers keeping pooled keys


@dataclass
class Glm5Layer:
    inner: object         # kimi_linear.KdaLayerWeights or deepseek2.MlaLayerWeights
    hc_attn: Hc
    hc_ffn: Hc
    indexer: Indexer | None = None   # a full sparse layer's (None: KDA, or shared)
    sparse: bool = False
    w_uk: object = None   # a sparse layer's kv_b k rows [H_r, N, C] and v rows transposed
    w_uv_t: object = None  # [H_r, C, V], float32 (prepare.Split.kv_b_dense): kernels/dsa.py's


def _hc(sp, p: str, part: str) -> Hc:
    f = lambda n: sp.f32(sp.get(p + f"{part}_{n}"))
    return Hc(sp.stack([f("fn").T]), f("base"), f("scale"))


def pooled_index(spec, i: int) -> int:
    """Sparse layer i's index among the layers keeping pooled keys (full indexers)."""
    return sum(1 for j in range(i) if not spec.is_linear_layer(j) and j not in spec.index_shared)


def shard_layer(spec, i: int, sp, shard) -> Glm5Layer:
    """KDA layers as kimilinear's (KDA heads split), sparse layers as deepseek2's (heads split,
    the latent replicated), the indexer and mHC replicated (float32: every rank computes the
    same choices and the same stream mix)."""
    p = f"model.layers.{i}."
    hc = dict(hc_attn=_hc(sp, p, "hc_attn"), hc_ffn=_hc(sp, p, "hc_ffn"))
    if spec.is_linear_layer(i):
        return Glm5Layer(kimi_linear.shard_layer(spec, i, sp, shard), **hc)
    inner = deepseek2.shard_layer(spec, i, sp, shard)
    w_uk, w_uv_t = sp.kv_b_dense(inner.w_ukt, inner.w_uv, spec.qk_nope_head_dim, spec.kv_lora_rank)
    ix = None
    if i not in spec.index_shared:
        a = p + "self_attn.indexer."
        f = lambda n: sp.f32(sp.get(a + n))
        t = lambda n: sp.stack([f(n).T])
        ix = Indexer(t("wq_b.weight"), t("wk.weight"), f("k_norm.weight"), f("k_norm.bias"),
                     t("weights_proj.weight"), f("index_kpool_compress_ape"),
                     t("index_kpool_compress_gate"), pooled_index(spec, i))
    return Glm5Layer(inner, **hc, indexer=ix, sparse=True, w_uk=w_uk, w_uv_t=w_uv_t)


# ------------------------------------------------------------------ the forward
def begin_round(ops, m, h):
    """The embedding [T, d] as hc_mult equal streams [T, N, d]; the round's DSA choices reset."""
    m.dsa_choices = None
    return ops.mhc_expand(h, m.spec.hc_mult)


def end_round(ops, m, h, out):
    """The head reads the streams' mean (the final norm follows, in the model)."""
    return ops.mhc_head(h), None


def _hc_args(m):
    return dict(norm_eps=m.spec.rms_eps, hc_eps=1e-6, iters=20)


def attend_sparse(ops, m, L, li, x, r, kv):
    """rmsnorm(x) -> the sparse latent attention (this rank's heads; all-reduced)."""
    s, H, I = m.spec, m.w.nq, L.inner
    xn = ops.rms_norm(x, I.attn_norm, s.rms_eps)
    q_resid = ops.rms_norm(ops.linear(xn, I.wq_a), I.q_a_norm, s.rms_eps)
    q = ops.linear(q_resid, I.wq)
    ckv = ops.linear(xn, I.wkv_a)
    att, m.dsa_choices = ops.dsa_attend(
        q.reshape(x.shape[0], H, s.head_dim), ckv, I.kv_a_norm, s.rms_eps, L.w_uk, L.w_uv_t,
        s.qk_nope_head_dim, kv.k(s.kv_index(li)), r, m.scale, L.indexer, xn, q_resid,
        None if L.indexer is None else kv.pooled_of(L.indexer.pooled),
        None if L.indexer is None else kv.index_ring_of(L.indexer.pooled),
        s.index_heads, s.index_topk, s.index_kpool, m.dsa_choices)
    o = ops.linear(att, I.wo)
    if m.all_reduce is not None:
        o = m.all_reduce(o)
    return o


def cpu_stages(spec, L) -> tuple:
    """Layer L's stages on the CPU (llama.cpu_stages): mHC around a KDA or sparse latent
    attention block and around the MLP (dense, or routed experts + shared)."""
    I = L.inner
    att = (("norm", "q_a", "q_a_norm", "q_b", "kv_a", "dsa_attend", "o") if L.sparse else
           kimi_linear.cpu_stages(spec, I)[:4])
    ffn = (("norm", "gate_up_swiglu", "down") if I.router is None else
           ("norm", "moe") + (("shared_expert",) if I.shared_gu is not None else ()))
    return ("mhc",) + att + ("mhc", "mhc") + ffn + ("mhc",)


def forward_layer(ops, m, L, li, h, out, r, kv):
    """One layer on the streams h [T, N, d] (out is None throughout): mHC around the
    attention block (KDA or sparse) and around the MLP block."""
    kw = _hc_args(m)
    x, post, comb = ops.mhc_pre(h, L.hc_attn, **kw)
    if L.sparse:
        y = attend_sparse(ops, m, L, li, x, r, kv)
    else:
        y, _ = kimi_linear.attend_kda(ops, m, L.inner, li, x, None, r, kv)
    h = ops.mhc_post(y, h, post, comb)
    x, post, comb = ops.mhc_pre(h, L.hc_ffn, **kw)
    y = ffn(ops, m, L.inner, x)
    return ops.mhc_post(y, h, post, comb), None


def ffn(ops, m, I, x):
    """rmsnorm(x) -> the MLP (dense, or routed experts + shared), SwiGLU clamped at
    swiglu_limit (gate above, up both ways) in every expert and the dense MLP; all-reduced."""
    s, w = m.spec, m.w
    xn = ops.rms_norm(x, I.mlp_norm, s.rms_eps)
    if I.router is None:                               # a leading dense layer
        out = ops.linear(ops.gate_up_silu(xn, I.wgu, w.ff, s.swiglu_limit), I.wdown)
    else:
        out = ops.moe(xn, I.router, I.router_bias, I.experts_gu, I.experts_down, w.expert_ff,
                      m.routing, I.shared_gu, I.shared_down, w.shared_ff, s.swiglu_limit)
    if m.all_reduce is not None:
        out = m.all_reduce(out)
    return out
