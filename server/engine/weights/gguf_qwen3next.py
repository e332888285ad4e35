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

`join` undoes the converter where it changed the layout: in_proj_qkvz rebuilt row by row
from attn_qkv and attn_gate (float32: the family regroups these rows anyway), conv1d given
its middle axis back, A_log = log(-ssm_a) (in float64, then float32: the kernel computes
exp(A_log) in float32, within an ulp of the file's -ssm_a), the shared gate as [1, d].
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from server.shapes.spec import ModelSpec, UnsupportedModel
from .loaded import WeightsError

# blk.N.<suffix> tensors `join` turns into HF tensors (the rest map by name: the family's
# GGUF_LAYER)
JOINED = (".attn_qkv.weight", ".attn_gate.weight", ".ssm_a", ".ssm_conv1d.weight")

SSM_KEYS = {"ssm.conv_kernel", "ssm.state_size", "ssm.group_count", "ssm.time_step_rank",
            "ssm.inner_size", "attention.recurrent_layers", "full_attention_interval",
            "expert_shared_feed_forward_length"}


def next_spec(meta, spec: ModelSpec, a: str, moe_keys: set) -> ModelSpec:
    """The qwen3next fields of a GGUF, as llama.cpp reads them (softmax router, its top-k
    renormalised, a sigmoid-gated shared expert; layer i recurrent per
    {a}.attention.recurrent_layers, else (i + 1) % full_attention_interval != 0). An
    unknown {a}.* key, or a layout foldserve does not serve, is refused by name."""
    path = meta.path
    known = moe_keys | SSM_KEYS
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


def join(spec: ModelSpec, by_name: dict, tensors: dict, path: str, to_float32) -> None:
    """The HF tensors of every linear layer from the converter's (see the module doc)."""
    nk, nv, dk, dv = spec.lin_k_heads, spec.lin_v_heads, spec.lin_k_dim, spec.lin_v_dim
    r = nv // nk
    for i in range(spec.n_layers):
        if not spec.is_linear_layer(i):
            extra = [f"blk.{i}{s}" for s in JOINED if f"blk.{i}{s}" in by_name]
            if extra:
                raise WeightsError(f"{path}: {', '.join(extra)} in full-attention layer {i}")
            continue
        b, p = f"blk.{i}", f"model.layers.{i}.linear_attn."
        parts = [f"{b}{s}" for s in JOINED]
        if any(n not in by_name for n in parts):
            continue                       # check_tensors names the missing HF tensor
        qkv = to_float32(by_name[b + ".attn_qkv.weight"], path)
        z = to_float32(by_name[b + ".attn_gate.weight"], path)
        d = qkv.shape[1]
        if qkv.shape != (2 * nk * dk + nv * dv, d) or z.shape != (nv * dv, d):
            raise WeightsError(f"{path}: {b}.attn_qkv.weight {list(qkv.shape)} / "
                               f"{b}.attn_gate.weight {list(z.shape)} do not fit {nk} key heads "
                               f"of {dk} and {nv} value heads of {dv}")
        q = qkv[:nk * dk].reshape(nk, dk, d)
        k = qkv[nk * dk:2 * nk * dk].reshape(nk, dk, d)
        v = qkv[2 * nk * dk:].reshape(nk, r * dv, d)
        zz = z.reshape(nk, r * dv, d)
        tensors[p + "in_proj_qkvz.weight"] = np.ascontiguousarray(
            np.concatenate([q, k, v, zz], axis=1).reshape(-1, d))
        conv = to_float32(by_name[b + ".ssm_conv1d.weight"], path)
        tensors[p + "conv1d.weight"] = np.ascontiguousarray(conv[:, None, :])
        a = to_float32(by_name[b + ".ssm_a"], path).astype(np.float64)
        if not np.all(a < 0):
            raise WeightsError(f"{path}: {b}.ssm_a holds values >= 0; the converter writes "
                               "-exp(A_log), always negative")
        tensors[p + "A_log"] = np.log(-a).astype(np.float32)
