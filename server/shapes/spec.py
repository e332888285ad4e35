"""ModelSpec: the shapes of a llama-family model, and the named real shapes for dummy:SHAPE."""
from __future__ import annotations

from dataclasses import dataclass, replace

SUPPORTED_ARCHS = ("llama", "mistral", "qwen2", "qwen3", "smollm")


class UnsupportedModel(ValueError):
    pass


@dataclass(frozen=True)
class ModelSpec:
    arch: str                 # llama | mistral | qwen2 | qwen3 (SmolLM is llama)
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    d_ff: int
    vocab: int
    rope_theta: float = 10000.0
    rms_eps: float = 1e-5
    max_context: int = 4096
    tie_embeddings: bool = False
    qkv_bias: bool = False    # Qwen2/2.5
    qk_norm: bool = False     # Qwen3
    # Llama 3.1 style rope scaling: (factor, low_freq_factor, high_freq_factor, original_max) or None
    rope_scaling: tuple | None = None
    name: str = ""

    @property
    def group(self) -> int:
        return self.n_heads // self.n_kv_heads

    @property
    def n_params(self) -> int:
        d, f, hd = self.d_model, self.d_ff, self.head_dim
        attn = d * hd * (self.n_heads * 2 + self.n_kv_heads * 2)
        per_layer = attn + 3 * d * f + 2 * d
        head = 0 if self.tie_embeddings else self.vocab * d
        return self.n_layers * per_layer + self.vocab * d + head + d

    def as_dict(self) -> dict:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def check_arch(arch: str) -> str:
    a = arch.lower()
    if a not in SUPPORTED_ARCHS:
        raise UnsupportedModel(
            f"architecture {arch!r} is not supported; foldserve runs the llama family: "
            + ", ".join(SUPPORTED_ARCHS))
    return "llama" if a == "smollm" else a


# Named real shapes, for dummy:SHAPE (seeded random weights, nothing read from disk).
SHAPES: dict[str, ModelSpec] = {
    "smollm2-135m": ModelSpec("llama", 30, 576, 9, 3, 64, 1536, 49152, rope_theta=100000.0,
                              rms_eps=1e-5, max_context=8192, tie_embeddings=True,
                              name="smollm2-135m"),
    "llama3-8b": ModelSpec("llama", 32, 4096, 32, 8, 128, 14336, 128256, rope_theta=500000.0,
                           rms_eps=1e-5, max_context=131072,
                           rope_scaling=(8.0, 1.0, 4.0, 8192), name="llama3-8b"),
    "qwen2.5-7b": ModelSpec("qwen2", 28, 3584, 28, 4, 128, 18944, 152064, rope_theta=1000000.0,
                            rms_eps=1e-6, max_context=32768, qkv_bias=True, name="qwen2.5-7b"),
    "qwen3-0.6b": ModelSpec("qwen3", 28, 1024, 16, 8, 128, 3072, 151936, rope_theta=1000000.0,
                            rms_eps=1e-6, max_context=40960, tie_embeddings=True, qk_norm=True,
                            name="qwen3-0.6b"),
    # tiny: for fast tests of every code path (GQA 2:1, odd KV-head count at TP=2)
    "tiny": ModelSpec("llama", 2, 64, 4, 2, 16, 128, 512, rope_theta=10000.0, max_context=512,
                      tie_embeddings=True, name="tiny"),
    "tiny-qwen2": ModelSpec("qwen2", 2, 64, 6, 3, 16, 96, 512, max_context=512, qkv_bias=True,
                            name="tiny-qwen2"),
    "tiny-qwen3": ModelSpec("qwen3", 2, 64, 4, 2, 16, 128, 512, max_context=512, qk_norm=True,
                            name="tiny-qwen3"),
}


def shape(name: str) -> ModelSpec:
    try:
        return SHAPES[name]
    except KeyError:
        raise UnsupportedModel(f"unknown dummy shape {name!r}; known: {', '.join(SHAPES)}") from None


def with_context(spec: ModelSpec, max_context: int) -> ModelSpec:
    return replace(spec, max_context=max_context)
