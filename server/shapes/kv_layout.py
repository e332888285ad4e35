"""The KV layout spec: what one token costs a rank in KV rows, the arrays the store makes,
and what attention reads. The planner (server/planner/layout.py), the rank's store
(server/engine/kvstore.py) and the engine's page bytes all ask this one table.

Two kinds:

  mha     K and V rows per kv head: each array a token and layer is [n_kv, head_dim],
          n_kv this rank's kv heads (split by TP);
              bytes a token = n_layers * 2 * n_kv * head_dim * kv_bytes
  latent  one row a token and layer, the normed compressed KV (kv_lora_rank) followed by
          the RoPE'd key part (qk_rope_head_dim), shared by every head (multi-head latent
          attention, DeepSeek-V2/V3, GLM-4.7-Flash); stored as one array of [1, width]:
              bytes a token = n_layers * (kv_lora_rank + rope_dims) * kv_bytes
          NOT split by TP: every rank holds every row (heads split, the latent replicated;
          each rank computes and writes the same rows to the same page ids).

Pure Python (the planner sizes a model with it, no numpy).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KVSpec:
    kind: str                     # "mha" | "latent"
    n_layers: int
    arrays: tuple                 # ((name, a row's shape), ...) the store makes, per layer

    @staticmethod
    def mha(n_layers: int, n_kv: int, head_dim: int) -> "KVSpec":
        return KVSpec("mha", n_layers, (("k", (n_kv, head_dim)), ("v", (n_kv, head_dim))))

    @staticmethod
    def latent(n_layers: int, kv_lora_rank: int, rope_dims: int) -> "KVSpec":
        return KVSpec("latent", n_layers, (("latent", (1, kv_lora_rank + rope_dims)),))

    @property
    def elements_per_token(self) -> int:
        """KV elements of one token, all layers."""
        n = 0
        for _, shape in self.arrays:
            k = 1
            for s in shape:
                k *= s
            n += k
        return self.n_layers * n

    def bytes_per_token(self, kv_bytes: int) -> int:
        return self.elements_per_token * kv_bytes

    def describe(self) -> str:
        """'K and V rows' or 'latent rows (512 + 64 a token and layer, every rank)'."""
        if self.kind == "latent":
            return (f"latent rows ({self.arrays[0][1][1]} values a token and layer, the same "
                    "on every rank)")
        return "K and V rows"


def kv_spec(spec, shard) -> KVSpec:
    """The KV layout of a ModelSpec's shard (server/shapes/shard.py)."""
    if getattr(spec, "kv_lora_rank", 0):
        return KVSpec.latent(spec.n_layers, spec.kv_lora_rank, spec.qk_rope_head_dim)
    return KVSpec.mha(spec.n_layers, shard.n_kv, spec.head_dim)
