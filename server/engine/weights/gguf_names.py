"""GGUF tensor names -> Hugging Face llama names."""
from __future__ import annotations

import re

_GLOBAL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}

_LAYER = {
    "attn_norm.weight": "input_layernorm.weight",
    "ffn_norm.weight": "post_attention_layernorm.weight",
    "attn_q.weight": "self_attn.q_proj.weight",
    "attn_k.weight": "self_attn.k_proj.weight",
    "attn_v.weight": "self_attn.v_proj.weight",
    "attn_output.weight": "self_attn.o_proj.weight",
    "attn_q.bias": "self_attn.q_proj.bias",
    "attn_k.bias": "self_attn.k_proj.bias",
    "attn_v.bias": "self_attn.v_proj.bias",
    "attn_q_norm.weight": "self_attn.q_norm.weight",
    "attn_k_norm.weight": "self_attn.k_norm.weight",
    "ffn_gate.weight": "mlp.gate_proj.weight",
    "ffn_up.weight": "mlp.up_proj.weight",
    "ffn_down.weight": "mlp.down_proj.weight",
}

# tensors a GGUF may carry that are not weights of ours (folded into the spec instead)
IGNORED = ("rope_freqs.weight",)

_BLK = re.compile(r"blk\.(\d+)\.(.+)")


def hf_name(gguf_name: str) -> str | None:
    """The HF name of a GGUF tensor, or None when we do not know it."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    m = _BLK.fullmatch(gguf_name)
    if m and m.group(2) in _LAYER:
        return f"model.layers.{m.group(1)}.{_LAYER[m.group(2)]}"
    return None
