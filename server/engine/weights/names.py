"""The tensors a llama-family model holds, by Hugging Face name, with their shapes.

Weights are in HF orientation [out_features, in_features]. Pure Python (no numpy), so
the planner can size a model without loading it.
"""
from __future__ import annotations

from server.shapes.spec import ModelSpec
from .loaded import WeightsError

EMBED = "model.embed_tokens.weight"
NORM = "model.norm.weight"
HEAD = "lm_head.weight"


def layer_shapes(spec: ModelSpec, i: int) -> dict[str, tuple[int, ...]]:
    d, hd, ff = spec.d_model, spec.head_dim, spec.d_ff
    q, kv = spec.n_heads * hd, spec.n_kv_heads * hd
    p = f"model.layers.{i}."
    out = {
        p + "input_layernorm.weight": (d,),
        p + "post_attention_layernorm.weight": (d,),
        p + "self_attn.q_proj.weight": (q, d),
        p + "self_attn.k_proj.weight": (kv, d),
        p + "self_attn.v_proj.weight": (kv, d),
        p + "self_attn.o_proj.weight": (d, q),
        p + "mlp.gate_proj.weight": (ff, d),
        p + "mlp.up_proj.weight": (ff, d),
        p + "mlp.down_proj.weight": (d, ff),
    }
    if spec.qkv_bias:
        out[p + "self_attn.q_proj.bias"] = (q,)
        out[p + "self_attn.k_proj.bias"] = (kv,)
        out[p + "self_attn.v_proj.bias"] = (kv,)
    if spec.qk_norm:
        out[p + "self_attn.q_norm.weight"] = (hd,)
        out[p + "self_attn.k_norm.weight"] = (hd,)
    return out


def tensor_shapes(spec: ModelSpec) -> dict[str, tuple[int, ...]]:
    """Every tensor of `spec`, including lm_head.weight (which aliases the embedding when tied)."""
    out = {EMBED: (spec.vocab, spec.d_model)}
    for i in range(spec.n_layers):
        out.update(layer_shapes(spec, i))
    out[NORM] = (spec.d_model,)
    out[HEAD] = (spec.vocab, spec.d_model)
    return out


def stored_names(spec: ModelSpec) -> list[str]:
    """The tensors a file must hold: lm_head only when it is not tied."""
    return [n for n in tensor_shapes(spec) if not (n == HEAD and spec.tie_embeddings)]


def n_floats(spec: ModelSpec) -> int:
    """Floats to hold the model in memory (a tied head costs nothing)."""
    def size(shape):
        k = 1
        for s in shape:
            k *= s
        return k
    per_layer = sum(size(s) for s in layer_shapes(spec, 0).values())
    head = 0 if spec.tie_embeddings else spec.vocab * spec.d_model
    return spec.n_layers * per_layer + spec.vocab * spec.d_model + head + spec.d_model


def check_tensors(spec: ModelSpec, tensors: dict, source: str) -> None:
    """Every expected tensor is present at its shape, and nothing else is."""
    want = tensor_shapes(spec)
    missing = [n for n in want if tensors.get(n) is None]
    if missing:
        raise WeightsError(f"{source}: missing tensor(s) {', '.join(missing[:5])}"
                           + (f" and {len(missing) - 5} more" if len(missing) > 5 else ""))
    extra = [n for n in tensors if n not in want]
    if extra:
        raise WeightsError(f"{source}: unexpected tensor(s) {', '.join(extra[:5])} for a "
                           f"{spec.arch} model; foldserve would ignore their weights")
    for n, shape in want.items():
        got = tuple(tensors[n].shape)
        if got != shape:
            raise WeightsError(f"{source}: tensor {n} has shape {list(got)}, the config implies {list(shape)}")
