"""GGUF `qwen3next` (llama.cpp's tensor names and keys: src/models/qwen3next.cpp, its
converter's Qwen3NextModel in conversion/qwen.py) -> the Hugging Face names and layout the
qwen3next family reads (server/families/qwen3next.py).

The converter writes, a Gated DeltaNet layer (blk.N, linear):

    attn_qkv.weight   [2 nk dk + nv dv, d]  HF in_proj_qkvz's q rows of every k head, then
                                            k, then v (per k head [q | k | v | z] in HF)
    attn_gate.weight  [nv dv, d]            its z rows, k head by k head
    ssm_ba.weight     [2 nv, d]             HF in_proj_ba as it is (per k head [b | a])
    ssm_conv1d.weight [C, K]                HF conv1d [C, 1, K] squeezed
    ssm_a             [nv]                  -exp(A_log)
    ssm_dt.bias       [nv]                  dt_bias
    ssm_norm.weight   [dv]                  the gated norm (plain w)
    ssm_out.weight    [d, nv dv]            out_proj

a full layer attn_q (per head [q | gate], as HF's q_proj), attn_k, attn_v, attn_output,
attn_q_norm, attn_k_norm; every layer attn_norm, post_attention_norm, the router
ffn_gate_inp, the experts ffn_{gate,up,down}_exps, the shared expert ffn_*_shexp and its
gate ffn_gate_inp_shexp [1, d]. The converter adds 1 to the zero-centred RMSNorm weights
(not the gated norm's), so a GGUF's spec has zero_centred_norms False.

GGUF `qwen35moe` (Qwen3.5/3.6 MoE; the converter's Qwen3_5MoeTextModel) has the same layers,
with the beta and decay inputs as two tensors (ssm_beta, ssm_alpha [nv, d]) and every v-head
axis in **tiled** order (the converter's _LinearAttentionVReorderBase: v head j of the file is
HF's v head (j mod nk) r + j div nk, HF grouping a k head's r v heads together): the v rows of
attn_qkv, attn_gate, ssm_beta, ssm_alpha, ssm_a, ssm_dt, the conv's v channels and ssm_out's
columns. `join` puts them back in HF's grouped order. rope.dimension_sections (interleaved
MRoPE) must cover the rotated pairs: a text token's sections share its position, so it is the
plain partial RoPE. HF `Qwen3_5MoeForCausalLM` stores in_proj_qkv, in_proj_z, in_proj_b,
in_proj_a apart (grouped order): `join_split_projections` builds Qwen3-Next's interleaved
in_proj_qkvz and in_proj_ba from them.

Files written before the converter split the projection (llama.cpp's "legacy GGUF") hold
`ssm_in.weight`, HF's in_proj_qkvz as it is: it maps by name, and `join` rebuilds the rest.

`join` undoes the converter where it changed the layout: in_proj_qkvz rebuilt row by row
from attn_qkv and attn_gate, in_proj_ba from ssm_beta / ssm_alpha and out_proj's columns
untiled, all three kept as the file's blocks where quantized (kernels.blocks.Blocks: whole
rows, or whole heads of columns, copied as bytes: no block requantized or dequantized, so the
engine runs them on the block kernels like every other stored matrix), conv1d given
its middle axis back, A_log = log(-ssm_a) (in float64, then float32: the kernel computes
exp(A_log) in float32, within an ulp of the file's -ssm_a), the shared gate as [1, d].
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from server.shapes.spec import ModelSpec, UnsupportedModel
from kernels.blocks import BLOCK, Blocks, concat_rows
from .loaded import WeightsError

# blk.N.<suffix> tensors `join` turns into HF tensors (the rest map by name: the family's
# GGUF_LAYER)
JOINED = (".attn_qkv.weight", ".attn_gate.weight", ".ssm_a", ".ssm_conv1d.weight")

# qwen35moe: these too (the v heads tiled, b and a apart)
JOINED35 = JOINED + (".ssm_beta.weight", ".ssm_alpha.weight", ".ssm_dt.bias", ".ssm_out.weight")

SSM_KEYS = {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
            "ssm.inner_size", "attention.recurrent_layers", "full_attention_interval",
            "expert_shared_feed_forward_length"}


def next_spec(meta, spec: ModelSpec, a: str, moe_keys: set) -> ModelSpec:
    """The qwen3next fields of a GGUF, as llama.cpp reads them (softmax router, its top-k
    renormalised, a sigmoid-gated shared expert; layer i recurrent per
    {a}.attention.recurrent_layers, else (i + 1) % full_attention_interval != 0). An
    unknown {a}.* key, or a layout foldserve does not serve, is refused by name."""
    path = meta.path
    known = moe_keys | SSM_KEYS | ({"rope.dimension_sections"} if a == "qwen35moe" else set())
    unknown = sorted(k for k in meta.fields if k.startswith(a + ".") and k[len(a) + 1:] not in known)
    if unknown:
        raise UnsupportedModel(
            f"{path}: GGUF key(s) {', '.join(unknown)} are not part of the qwen3next family as "
            f"foldserve serves it (known {a}.* keys: {', '.join(sorted(known))})")

    def need(key):
        return int(meta.need(f"{a}.{key}"))

    gating = meta.get(f"{a}.expert_gating_func")
    if gating not in (None, 0, 1):
        raise UnsupportedModel(f"{path}: {a}.expert_gating_func {gating} (qwen3next gates by "
                               "softmax, 1)")
    if meta.get(f"{a}.expert_weights_norm") is False:
        raise UnsupportedModel(f"{path}: {a}.expert_weights_norm false (qwen3next renormalises "
                               "its top-k weights)")
    block_count = need("block_count")
    nextn = int(meta.get(f"{a}.nextn_predict_layers", 0))
    n_layers = block_count - nextn
    if not 0 < n_layers:
        raise WeightsError(f"{path}: {a}.nextn_predict_layers {nextn} with block_count {block_count}")
    rec = meta.get(f"{a}.attention.recurrent_layers")
    every = int(meta.get(f"{a}.full_attention_interval", 4) or 4)
    if rec is not None:
        rec = [bool(x) for x in rec][:n_layers]
        full = [i for i, r in enumerate(rec) if not r]
        if len(rec) != n_layers or not full or full != list(range(full[0], n_layers, full[0] + 1)):
            raise UnsupportedModel(f"{path}: {a}.attention.recurrent_layers {rec}: foldserve "
                                   "serves full attention every n-th layer (3 linear then 1 full)")
        every = full[0] + 1
    nk, nv = need("ssm.group_count"), need("ssm.time_step_rank")
    if nv % nk:
        raise UnsupportedModel(f"{path}: {a}.ssm.time_step_rank {nv} is not a multiple of "
                               f"{a}.ssm.group_count {nk}")
    dk = need("ssm.state_size")
    inner = need("ssm.inner_size")
    if inner % nv:
        raise WeightsError(f"{path}: {a}.ssm.inner_size {inner} is not a multiple of "
                           f"{a}.ssm.time_step_rank {nv}")
    rot = int(meta.get(f"{a}.rope.dimension_count", 0) or spec.head_dim)
    sections = meta.get(f"{a}.rope.dimension_sections")
    if sections is not None and (sum(sections) != rot // 2 or (len(sections) > 3 and sections[3])):
        raise UnsupportedModel(f"{path}: {a}.rope.dimension_sections {list(sections)} must cover "
                               f"the {rot // 2} rotated pairs with the text sections (foldserve "
                               "serves text: the plain partial RoPE)")
    sff = int(meta.get(f"{a}.expert_shared_feed_forward_length", 0))
    scale = float(str(np.float32(meta.get(f"{a}.expert_weights_scale", 0.0)))) or 1.0
    return replace(
        spec, n_layers=n_layers, nextn_layers=nextn, d_ff=0,
        n_experts=need("expert_count"), n_experts_used=need("expert_used_count"),
        expert_ff=need("expert_feed_forward_length"), n_shared_experts=1 if sff else 0,
        shared_ff=sff, router="softmax", norm_topk_prob=True, routed_scaling_factor=scale,
        rotary_dim=0 if rot == spec.head_dim else rot, qk_norm=True, full_attn_every=every,
        lin_k_heads=nk, lin_v_heads=nv, lin_k_dim=dk, lin_v_dim=inner // nv,
        conv_kernel=need("ssm.conv_kernel"), zero_centred_norms=False)


def _untile_index(nk: int, r: int, hd: int) -> np.ndarray:
    """Row j of HF's grouped order (k r + i, hd rows a head) is row idx[j] of the converter's
    tiled order (i nk + k): the permutation `_untile` applies along its axis."""
    return np.arange(nk * r * hd).reshape(r, nk, hd).transpose(1, 0, 2).reshape(-1)


def _untile(x, nk: int, r: int, hd: int, axis: int = 0):
    """v heads from the converter's tiled order (j = i nk + k) back to HF's grouped one
    (k r + i) along `axis`, hd values a head. Blocks (a matrix kept as the file's blocks)
    move whole rows (axis 0) or whole heads of columns (axis 1, hd a multiple of the block:
    the rows' blocks regrouped as bytes); a column head that would cut a block is
    dequantized to float32, the only case that is."""
    idx = _untile_index(nk, r, hd)
    if isinstance(x, Blocks):
        if axis == 0:
            return x.take_rows(idx)
        if hd % x.block:
            x = x.dequantize()
        else:
            nb = hd // x.block * BLOCK[x.kind][1]            # bytes a head of columns
            heads = x.data.reshape(x.rows, nk * r, nb)[:, idx[::hd] // hd]
            return Blocks(x.kind, x.rows, x.cols, np.ascontiguousarray(heads.reshape(x.rows, -1)))
    return np.ascontiguousarray(np.take(x, idx, axis=axis))


def _row_stack(parts: list, index) -> object:
    """Rows `index` of the parts stacked: Blocks (a byte copy of whole rows, no block
    requantized or dequantized) where every part is Blocks of one kind, else float32."""
    if all(isinstance(p, Blocks) for p in parts) and len({p.kind for p in parts}) == 1:
        return (concat_rows(parts) if len(parts) > 1 else parts[0]).take_rows(index)
    dense = [p.dequantize() if isinstance(p, Blocks) else np.asarray(p, np.float32) for p in parts]
    return np.ascontiguousarray(np.concatenate(dense)[index])


def qkvz_index(nk: int, nv: int, dk: int, dv: int) -> np.ndarray:
    """HF in_proj_qkvz's rows (per k head [q | k | v (r dv) | z (r dv)]) as rows of the
    converter's [attn_qkv (q all | k all | v all, grouped) ; attn_gate (z, grouped)]."""
    r, K = nv // nk, nk * dk
    V = nv * dv
    out = []
    for h in range(nk):
        out += [np.arange(h * dk, (h + 1) * dk), K + np.arange(h * dk, (h + 1) * dk),
                2 * K + np.arange(h * r * dv, (h + 1) * r * dv),
                2 * K + V + np.arange(h * r * dv, (h + 1) * r * dv)]
    return np.concatenate(out)


def join(spec: ModelSpec, by_name: dict, tensors: dict, path: str, to_float32,
         tiled: bool = False, as_stored=None) -> None:
    """The HF tensors of every linear layer from the converter's (see the module doc);
    tiled: a qwen35moe file (v heads tiled, ssm_beta / ssm_alpha apart). as_stored(t, path):
    the loader's reader of a matrix as the file's blocks (kernels.blocks.Blocks where
    quantized); given, in_proj_qkvz, in_proj_ba and out_proj stay the file's blocks (their
    rows or whole heads of columns regrouped as bytes: the same values), else float32."""
    nk, nv, dk, dv = spec.lin_k_heads, spec.lin_v_heads, spec.lin_k_dim, spec.lin_v_dim
    r = nv // nk
    joined = JOINED35 if tiled else JOINED
    stored = as_stored or to_float32
    for i in range(spec.n_layers):
        if not spec.is_linear_layer(i):
            extra = [f"blk.{i}{s}" for s in joined if f"blk.{i}{s}" in by_name]
            if extra:
                raise WeightsError(f"{path}: {', '.join(extra)} in full-attention layer {i}")
            continue
        b, p = f"blk.{i}", f"model.layers.{i}.linear_attn."
        legacy = not tiled and b + ".ssm_in.weight" in by_name     # in_proj_qkvz by name
        parts = [f"{b}{s}" for s in joined
                 if not (legacy and s in (".attn_qkv.weight", ".attn_gate.weight"))]
        if any(n not in by_name for n in parts):
            continue                       # check_tensors names the missing HF tensor
        get = lambda s: to_float32(by_name[b + s], path)
        mat = lambda s: stored(by_name[b + s], path)
        if legacy:
            if b + ".attn_qkv.weight" in by_name:
                raise WeightsError(f"{path}: {b}.ssm_in.weight and {b}.attn_qkv.weight both")
            conv, a = get(".ssm_conv1d.weight"), get(".ssm_a").astype(np.float64)
            tensors[p + "conv1d.weight"] = np.ascontiguousarray(conv[:, None, :])
            if not np.all(a < 0):
                raise WeightsError(f"{path}: {b}.ssm_a holds values >= 0; the converter writes "
                                   "-exp(A_log), always negative")
            tensors[p + "A_log"] = np.log(-a).astype(np.float32)
            continue
        qkv, z = mat(".attn_qkv.weight"), mat(".attn_gate.weight")
        d = qkv.shape[1]
        if tuple(qkv.shape) != (2 * nk * dk + nv * dv, d) or tuple(z.shape) != (nv * dv, d):
            raise WeightsError(f"{path}: {b}.attn_qkv.weight {list(qkv.shape)} / "
                               f"{b}.attn_gate.weight {list(z.shape)} do not fit {nk} key heads "
                               f"of {dk} and {nv} value heads of {dv}")
        conv = get(".ssm_conv1d.weight")
        a = get(".ssm_a").astype(np.float64)
        K2 = 2 * nk * dk
        index = qkvz_index(nk, nv, dk, dv)          # rows of [qkv ; z], grouped v heads
        if tiled:
            # the v rows of qkv and the z rows come tiled: compose the untiling into the index
            ut = _untile_index(nk, r, dv)
            src = np.concatenate([np.arange(K2), K2 + ut, K2 + nv * dv + ut])
            index = src[index]
            conv = np.concatenate([conv[:K2], _untile(conv[K2:], nk, r, dv)])
            a = _untile(a, nk, r, 1)
            u1 = _untile_index(nk, r, 1)
            ba = np.concatenate([np.concatenate([u1[k * r:(k + 1) * r], nv + u1[k * r:(k + 1) * r]])
                                 for k in range(nk)])
            tensors[p + "in_proj_ba.weight"] = _row_stack(
                [mat(".ssm_beta.weight"), mat(".ssm_alpha.weight")], ba)
            tensors[p + "dt_bias"] = _untile(get(".ssm_dt.bias"), nk, r, 1)
            tensors[p + "out_proj.weight"] = _untile(mat(".ssm_out.weight"), nk, r, dv, axis=1)
        tensors[p + "in_proj_qkvz.weight"] = _row_stack([qkv, z], index)
        tensors[p + "conv1d.weight"] = np.ascontiguousarray(conv[:, None, :])
        if not np.all(a < 0):
            raise WeightsError(f"{path}: {b}.ssm_a holds values >= 0; the converter writes "
                               "-exp(A_log), always negative")
        tensors[p + "A_log"] = np.log(-a).astype(np.float32)


SPLIT = ("in_proj_qkv.weight", "in_proj_z.weight", "in_proj_b.weight", "in_proj_a.weight")


def join_split_projections(spec: ModelSpec, tensors: dict, source: str) -> None:
    """HF Qwen3_5MoeForCausalLM's in_proj_qkv [q all | k all | v all], in_proj_z, in_proj_b,
    in_proj_a (v heads grouped by k head) -> Qwen3-Next's in_proj_qkvz (per k head
    [q | k | v | z]) and in_proj_ba (per k head [b | a]), float32. A folder with neither
    form is left to check_tensors."""
    nk, nv, dk, dv = spec.lin_k_heads, spec.lin_v_heads, spec.lin_k_dim, spec.lin_v_dim
    r = nv // nk
    for i in range(spec.n_layers):
        p = f"model.layers.{i}.linear_attn."
        if not all(p + s in tensors for s in SPLIT):
            if any(p + s in tensors for s in SPLIT):
                missing = [p + s for s in SPLIT if p + s not in tensors]
                raise WeightsError(f"{source}: {', '.join(missing)} missing beside the other "
                                   "split projections")
            continue
        qkv, z, b, a = (np.asarray(tensors.pop(p + s), np.float32) for s in SPLIT)
        d = qkv.shape[1]
        q = qkv[:nk * dk].reshape(nk, dk, d)
        k = qkv[nk * dk:2 * nk * dk].reshape(nk, dk, d)
        v = qkv[2 * nk * dk:].reshape(nk, r * dv, d)
        tensors[p + "in_proj_qkvz.weight"] = np.ascontiguousarray(
            np.concatenate([q, k, v, z.reshape(nk, r * dv, d)], axis=1).reshape(-1, d))
        tensors[p + "in_proj_ba.weight"] = np.ascontiguousarray(
            np.concatenate([b.reshape(nk, r, d), a.reshape(nk, r, d)], axis=1).reshape(-1, d))
