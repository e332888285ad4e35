"""Layout: what one rank's shard of a model costs per KV token, per page and per stream.

    bytes_per_token = the KV layout spec's bytes a token (server/shapes/kv_layout.py):
                      MHA: n_layers * 2 (K and V) * n_kv (this shard's kv heads) * head_dim * kv_bytes
                      latent: n_layers * (kv_lora_rank + rope dims) * kv_bytes, every rank
                      window: the full layers' MHA rows only (gpt-oss)
    page_bytes      = bytes_per_token * page_rows
    fixed_bytes     = table + sampling + scratch (+ the window kind's rings, + a recurrent
                      family's states), per stream (see `fixed_bytes`)

kv_bytes is the KV storage dtype's size: 4 (float32) on the CPU, 2 (bf16) on the GPU.
Shards with uneven kv heads (llama3-8b at TP=3: 3, 3, 2) have different page bytes;
the pool has the same number of pages on every rank, each rank's pages its own size.
"""
from __future__ import annotations

from dataclasses import dataclass

from server.shapes.kv_layout import KVSpec, kv_spec
from server.shapes.shard import shard_of
from server.shapes.spec import ModelSpec

KV_BYTES = {"cpu": 4, "cuda": 2}

# --page-rows default, by measurement (docs/receipts/2026-11-29-page-rows/, bench/page_rows.py):
# on the CPU, pages of 8 to 128 rows ran within the run-to-run spread of the whole-window
# twin (0.92x-1.15x), so the choice is about waste: a request leaves (P-1)/2 rows of its
# last page empty and the prompt cache reuses prefixes in whole pages. 16 keeps both small
# with a short table. The GPU default is 16 too, not yet measured there.
DEFAULT_PAGE_ROWS = {"cpu": 16, "cuda": 16}

TABLE_ENTRY_BYTES = 4       # one int32 page id per table row
SAMPLING_VECTORS = 4        # logits, penalty counts, probabilities, sort scratch: vocab floats each
ACT_DMODEL_ROWS = 4         # residual, normed input, attention output, projection output
ACT_FF_ROWS = 3             # gate, up, their product (this rank's share of d_ff)
FLOAT_BYTES = 4             # sampling state and activations are float32 (fp32 accumulation)


def default_page_rows(device: str = "cpu") -> int:
    return DEFAULT_PAGE_ROWS.get(device, 16)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Layout:
    rank: int
    n_layers: int
    n_kv: int               # kv heads this rank holds
    head_dim: int
    kv_bytes: int           # bytes per KV element
    page_rows: int
    vocab: int
    d_model: int
    ff_rank: int            # this rank's share of the MLP's intermediate size
    prefill_chunk: int = 256
    moe_floats: int = 0     # a token's floats in a MoE layer on this rank (`moe_floats`)
    kv: KVSpec | None = None  # the KV layout (None: MHA of n_layers, n_kv, head_dim)

    @staticmethod
    def for_shard(spec: ModelSpec, tp: int, rank: int, kv_bytes: int, page_rows: int,
                  prefill_chunk: int = 256) -> "Layout":
        if page_rows < 1:
            raise ValueError(f"--page-rows {page_rows} must be at least 1")
        kpool = getattr(spec, "index_kpool", 0)
        if kpool and page_rows % kpool:
            raise ValueError(f"--page-rows {page_rows} must be a multiple of {spec.name or spec.arch}'s "
                             f"index_kpool {kpool}: a page holds whole pools' pooled keys")
        shard = shard_of(spec, tp, rank)
        lo, hi = shard.ff
        dense = not spec.n_experts or spec.first_dense_layers > 0
        return Layout(rank, spec.n_layers, shard.n_kv, spec.head_dim, kv_bytes, page_rows,
                      spec.vocab, spec.d_model, hi - lo if dense else 0, prefill_chunk,
                      moe_floats(spec, shard), kv_spec(spec, shard))

    @property
    def kv_spec(self) -> KVSpec:
        return self.kv or KVSpec.mha(self.n_layers, self.n_kv, self.head_dim)

    @property
    def bytes_per_token(self) -> int:
        return self.kv_spec.bytes_per_token(self.kv_bytes)

    @property
    def page_bytes(self) -> int:
        return self.bytes_per_token * self.page_rows

    def pages_for(self, rows: int) -> int:
        """Pages holding `rows` rows: row r lives in page r // page_rows."""
        return cdiv(rows, self.page_rows)

    def fixed_bytes(self, context: int, paged: bool, verify: int = 1) -> int:
        """A stream's bytes besides its KV rows on pages (or its window):

            table    = 4 * pages of one window                    (paged only: int32 page ids)
            sampling = 4 * vocab * 4                              (logits, penalties, probs, sort)
            scratch  = prefill_chunk * (4 * d_model + max(3 * ff_rank, moe_floats)) * 4
                       (one prefill chunk's float32 activations: residual, normed input,
                        attention out, projection out; gate, up and their product, or a
                        MoE layer's routed experts': `moe_floats`)
            rings    = the window kind's window layers' rings (KVSpec.ring_bytes: each
                       ceil((W - 1 + max(P, verify)) / P) pages of P rows), whatever the context
            states   = the KV layout spec's fixed part (recurrent layers' states and conv
                       windows of this rank's heads, float32; 0 for a family without)
        """
        table = TABLE_ENTRY_BYTES * self.pages_for(context) if paged else 0
        sampling = SAMPLING_VECTORS * self.vocab * FLOAT_BYTES
        scratch = self.prefill_chunk * (ACT_DMODEL_ROWS * self.d_model
                                        + max(ACT_FF_ROWS * self.ff_rank, self.moe_floats)) * FLOAT_BYTES
        return (table + sampling + scratch
                + self.kv_spec.ring_bytes(self.kv_bytes, self.page_rows, verify)
                + self.kv_spec.fixed_bytes)


def moe_floats(spec: ModelSpec, shard) -> int:
    """A token's float32 activations in a MoE layer on this shard (0 for a dense model):

        router   = 2 * n_experts                       (logits, and their float64 weights)
        routed   = k * (3 * expert_ff_rank + d_model)  (each chosen expert's gate, up, their
                                                         product, and its output row)
        shared   = 3 * shared_ff_rank
    """
    if not spec.n_experts:
        return 0
    eff = shard.expert_ff[1] - shard.expert_ff[0]
    sff = shard.shared_ff[1] - shard.shared_ff[0]
    return (2 * spec.n_experts + spec.n_experts_used * (ACT_FF_ROWS * eff + spec.d_model)
            + ACT_FF_ROWS * sff)


def layouts(spec: ModelSpec, tp: int, kv_bytes: int, page_rows: int,
            prefill_chunk: int = 256) -> tuple[Layout, ...]:
    """Every rank's layout, rank order."""
    return tuple(Layout.for_shard(spec, tp, r, kv_bytes, page_rows, prefill_chunk)
                 for r in range(tp))
