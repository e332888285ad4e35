"""GGUF tensor names -> Hugging Face names, by the model's family table (server/families)."""
from __future__ import annotations

import re

from server.families import family

_GLOBAL = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}

# tensors a GGUF may carry that are not weights of ours (folded into the spec instead)
IGNORED = ("rope_freqs.weight",)

_BLK = re.compile(r"blk\.(\d+)\.(.+)")


def hf_name(gguf_name: str, arch: str = "llama") -> str | None:
    """The HF name of a GGUF tensor, or None when the family does not know it (a 3-D
    expert tensor too: `expert_tensor`)."""
    if gguf_name in _GLOBAL:
        return _GLOBAL[gguf_name]
    m = _BLK.fullmatch(gguf_name)
    table = family(arch).GGUF_LAYER
    if m and m.group(2) in table:
        return f"model.layers.{m.group(1)}.{table[m.group(2)]}"
    return None


def expert_tensor(gguf_name: str, arch: str) -> tuple[int, str] | None:
    """(layer, "gate_proj" | "up_proj" | "down_proj") of a 3-D expert tensor, else None."""
    m = _BLK.fullmatch(gguf_name)
    table = family(arch).GGUF_EXPERTS
    if m and m.group(2) in table:
        return int(m.group(1)), table[m.group(2)]
    return None


def block_of(gguf_name: str) -> int | None:
    """The block index of a blk.N.* tensor, else None."""
    m = _BLK.fullmatch(gguf_name)
    return int(m.group(1)) if m else None
