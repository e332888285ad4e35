"""GGUF metadata -> ModelSpec."""
from __future__ import annotations

import numpy as np

from server.shapes.spec import ModelSpec, check_arch
from .loaded import WeightsError


class Fields:
    """Typed reads of a GGUFReader's fields, naming the file and key on error."""

    def __init__(self, reader, path: str):
        self.fields, self.path = reader.fields, path

    def get(self, key: str, default=None):
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def need(self, key: str):
        f = self.fields.get(key)
        if f is None:
            raise WeightsError(f"{self.path}: GGUF metadata has no {key!r}; is this a complete model file?")
        return f.contents()

    def count(self, key: str) -> int | None:
        f = self.fields.get(key)
        return None if f is None else len(f.data)


def f32(x) -> float:
    """A float32 field as the decimal it was written from (9.99999974e-06 -> 1e-05)."""
    return float(str(np.float32(x)))


def spec_from_gguf(meta: Fields, names: set[str]) -> tuple[ModelSpec, str]:
    """(spec, the raw architecture string that prefixes the metadata keys)."""
    raw = str(meta.need("general.architecture"))
    arch = check_arch(raw)
    a = raw
    d = int(meta.need(f"{a}.embedding_length"))
    n_heads = int(meta.need(f"{a}.attention.head_count"))
    n_kv = int(meta.get(f"{a}.attention.head_count_kv", n_heads))
    head_dim = meta.get(f"{a}.attention.key_length") or meta.get(f"{a}.rope.dimension_count") \
        or d // n_heads
    vocab = meta.count("tokenizer.ggml.tokens") or meta.get(f"{a}.vocab_size")
    if not vocab:
        raise WeightsError(f"{meta.path}: no tokenizer.ggml.tokens and no {a}.vocab_size to size the vocabulary")
    spec = ModelSpec(
        arch=arch,
        n_layers=int(meta.need(f"{a}.block_count")),
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=int(head_dim),
        d_ff=int(meta.need(f"{a}.feed_forward_length")),
        vocab=int(vocab),
        rope_theta=f32(meta.get(f"{a}.rope.freq_base", 10000.0)),
        rms_eps=f32(meta.get(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
        max_context=int(meta.get(f"{a}.context_length", 4096)),
        tie_embeddings="output.weight" not in names,
        qkv_bias="blk.0.attn_q.bias" in names,
        qk_norm="blk.0.attn_q_norm.weight" in names,
        name=str(meta.get("general.name", "")),
    )
    kind = meta.get(f"{a}.rope.scaling.type")
    if kind not in (None, "none", "llama3"):
        raise WeightsError(f"{meta.path}: rope scaling {kind!r} is not supported "
                           "(foldserve supports Llama 3.1 style scaling only)")
    return spec, a
