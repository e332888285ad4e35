"""The KV layout spec: what one token costs a rank in KV rows, the arrays the store makes,
and what attention reads. The planner (server/planner/layout.py), the rank's store
(server/engine/kvstore.py) and the engine's page bytes all ask this one table.

Three kinds (and a fixed part, below):

  mha     K and V rows per kv head: each array a token and layer is [n_kv, head_dim],
          n_kv this rank's kv heads (split by TP);
              bytes a token = n_layers * 2 * n_kv * head_dim * kv_bytes
  latent  one row a token and layer, the normed compressed KV (kv_lora_rank) followed by
          the RoPE'd key part (qk_rope_head_dim), shared by every head (multi-head latent
          attention, DeepSeek-V2/V3, GLM-4.7-Flash); stored as one array of [1, width]:
              bytes a token = n_layers * (kv_lora_rank + rope_dims) * kv_bytes
          NOT split by TP: every rank holds every row (heads split, the latent replicated;
          each rank computes and writes the same rows to the same page ids).
  window  MHA rows, but the sliding-window layers (gpt-oss: 0, 2, 4, ..., window W) keep
          a stream's last rows only: the pages (bytes a token) hold the full layers alone,
              bytes a token = n_full_layers * 2 * n_kv * head_dim * kv_bytes
          and each stream holds, a window layer, a ring of k = ceil((W - 1 + max(P, V)) / P)
          pages of P (page_rows) rows, row p in ring page (p // P) mod k: a fixed cost a
          stream, whatever the context,
              ring bytes a stream = n_window_layers * 2 * n_kv * head_dim * k * P * kv_bytes
          (a chunk is written and read P rows at a time, so its writes never reach a row one
          of its queries still reads; V, the verify window, is what a drafted round may
          write past the rows it keeps: those writes never reach a row still to be read).

A layout may also hold a **fixed part**: arrays a stream keeps whatever its length, beside
its pages (recurrent layers: a Gated DeltaNet layer's state [v heads, k dim, v dim] and its
short convolution's window [kernel - 1, channels], this rank's heads; qwen3next; a Kimi
Delta Attention layer's the same with v heads = k heads; kimilinear, whose full layers'
latent rows are the pages' rows). They are
float32 on every device (the recurrence accumulates in them), one set a stream slot:

  fixed   ((name, a stream's shape), ...) per recurrent layer, `n_fixed_layers` of them;
              fixed bytes a stream = n_fixed_layers * sum(prod(shape)) * 4
          split by TP with the heads (each rank keeps its own heads' states).
  The KV rows then cover only the layers that write them (`n_layers`: the full-attention
  layers of a hybrid).

An MTP (NextN) layer run (`--draft mtp`, `spec.mtp_layers`; server/families/nextn.py) writes
rows of the same kind as a trunk layer's: it is counted as one more layer after the trunk's
(`mtp_layers` of `n_layers`), on the stream's pages or window like any other.

A latent layout may also keep **pooled indexer keys** (GLM-5.3-Flash's DSA indexer,
kernels/dsa.py): each layer with its own indexer stores, beside the latent rows it pools, one
key of index_head_dim values a pool of index_kpool rows, in the same page; counted a row:

  pooled  ((name, (1, index_head_dim / index_kpool)),), `n_pooled_layers` of them (the
          full-indexer latent layers and the MTP layer); a page of P rows (P a multiple of
          index_kpool) holds P / index_kpool pooled keys a layer; replicated like the rows.
              bytes a token = (n_layers * (kv_lora_rank + rope) + n_pooled_layers *
                               index_head_dim / index_kpool) * kv_bytes
  rings   ((name, a stream's shape),) per pooled layer: the index ring [kpool, 2,
          index_head_dim] (a pool's k and gate rows until its last token), float32, in the
          fixed part with the recurrent layers' states (every rank: the indexer is not split).

Pure Python (the planner sizes a model with it, no numpy).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KVSpec:
    kind: str                     # "mha" | "latent" | "window"
    n_layers: int                 # layers that write KV rows
    arrays: tuple                 # ((name, a row's shape), ...) the store makes, per layer
    window: int = 0               # window kind: rows a window layer's query reads back
    window_layers: tuple = ()     # window kind: those layers (model indices, ascending)
    fixed: tuple = ()             # ((name, a stream's shape), ...) per recurrent layer
    n_fixed_layers: int = 0       # recurrent layers (each keeps `fixed` a stream)
    mtp_layers: int = 0           # of n_layers, the last ones an MTP (NextN) layer's rows
    pooled: tuple = ()            # ((name, a row's shape),): pooled indexer keys, a row's share
    n_pooled_layers: int = 0      # layers keeping pooled keys on the pages
    rings: tuple = ()             # ((name, a stream's shape),) per pooled layer (fixed part)

    FIXED_BYTES = 4               # the fixed part is float32 on every device

    @staticmethod
    def mha(n_layers: int, n_kv: int, head_dim: int, mtp_layers: int = 0) -> "KVSpec":
        return KVSpec("mha", n_layers, (("k", (n_kv, head_dim)), ("v", (n_kv, head_dim))),
                      mtp_layers=mtp_layers)

    @staticmethod
    def latent(n_layers: int, kv_lora_rank: int, rope_dims: int, mtp_layers: int = 0) -> "KVSpec":
        return KVSpec("latent", n_layers, (("latent", (1, kv_lora_rank + rope_dims)),),
                      mtp_layers=mtp_layers)

    @staticmethod
    def windowed(n_layers: int, n_kv: int, head_dim: int, window: int,
                 window_layers: tuple) -> "KVSpec":
        return KVSpec("window", n_layers, (("k", (n_kv, head_dim)), ("v", (n_kv, head_dim))),
                      window, tuple(window_layers))

    @property
    def paged_layers(self) -> tuple:
        """The layers whose rows are on pages (or whole windows): every one but the ring's."""
        skip = set(self.window_layers)
        return tuple(i for i in range(self.n_layers) if i not in skip)

    @property
    def row_elements(self) -> int:
        """KV elements of one token in one layer."""
        n = 0
        for _, shape in self.arrays:
            k = 1
            for s in shape:
                k *= s
            n += k
        return n

    @property
    def pooled_row_elements(self) -> int:
        """Pooled-key elements a row of one pooled layer (index_head_dim / index_kpool)."""
        return sum(_prod(shape) for _, shape in self.pooled)

    @property
    def elements_per_token(self) -> int:
        """KV elements of one token on pages: all layers but a window kind's window layers,
        and the pooled keys' share of a row on the pooled layers."""
        return (len(self.paged_layers) * self.row_elements
                + self.n_pooled_layers * self.pooled_row_elements)

    def bytes_per_token(self, kv_bytes: int) -> int:
        return self.elements_per_token * kv_bytes

    @property
    def fixed_bytes(self) -> int:
        """One stream's fixed part (every recurrent layer's state and window), bytes."""
        n = 0
        for _, shape in self.fixed:
            k = 1
            for s in shape:
                k *= s
            n += k
        rings = sum(_prod(shape) for _, shape in self.rings)
        return (self.n_fixed_layers * n + self.n_pooled_layers * rings) * self.FIXED_BYTES

    @property
    def snap_bytes(self) -> int:
        """A snapshot slot (the prompt cache's kept copy of a stream's fixed part): the
        recurrent layers' states and windows; 0 for no fixed part. A layout's index rings
        (GLM-5.3-Flash's pooled keys in the making) are not kept: a slot stands at a page
        boundary, which is a pool boundary (page rows a multiple of index_kpool, the
        planner's check), where every pool is complete and written to its page and a ring
        holds nothing the stream reads again (kernels/dsa.write rewrites all its kpool slots
        before the next pool completes); the engine refuses a restore elsewhere."""
        n = 0
        for _, shape in self.fixed:
            n += _prod(shape)
        return self.n_fixed_layers * n * self.FIXED_BYTES

    def with_pooled(self, n_pooled_layers: int, head_dim: int, kpool: int) -> "KVSpec":
        """Pooled indexer keys on `n_pooled_layers` layers (and their rings in the fixed
        part); head_dim must be a multiple of kpool (kernels/dsa.py's check_geometry)."""
        from dataclasses import replace
        if kpool < 2 or head_dim % kpool:
            raise ValueError(f"index_head_dim {head_dim} is not a multiple of index_kpool "
                             f"{kpool} (a page row holds index_head_dim / index_kpool values)")
        return replace(self, pooled=(("pooled", (1, head_dim // kpool)),),
                       n_pooled_layers=n_pooled_layers,
                       rings=(("index_ring", (kpool, 2, head_dim)),))

    def with_fixed(self, n_fixed_layers: int, fixed: tuple) -> "KVSpec":
        from dataclasses import replace
        return replace(self, fixed=tuple(fixed), n_fixed_layers=n_fixed_layers)

    def ring_pages(self, page_rows: int, verify: int = 1) -> int:
        """Pages of a window layer's ring a stream: ceil((W - 1 + max(P, V)) / P), V the
        verify window (rows a drafted round writes and may take back); 0 but the window kind."""
        if not self.window_layers:
            return 0
        return -(-(self.window - 1 + max(page_rows, verify)) // page_rows)

    def ring_bytes(self, kv_bytes: int, page_rows: int, verify: int = 1) -> int:
        """A stream's ring bytes, every window layer (0 but the window kind)."""
        return (len(self.window_layers) * self.row_elements * self.ring_pages(page_rows, verify)
                * page_rows * kv_bytes)

    def describe(self) -> str:
        """'K and V rows' or 'latent rows (512 + 64 a token and layer, every rank)'."""
        if self.pooled:
            mib = self.fixed_bytes / 2**20
            return (f"latent rows on {self.n_layers} layers and pooled indexer keys on "
                    f"{self.n_pooled_layers} ({self.row_elements} + "
                    f"{self.pooled_row_elements} values a row, the same on every rank); "
                    f"recurrent states of {self.n_fixed_layers} layers and index rings beside "
                    f"the pages, {mib:.2f} MiB fixed each stream")
        if self.fixed:
            mib = self.fixed_bytes / 2**20
            rows = "latent rows" if self.kind == "latent" else "K and V rows"
            return (f"{rows} on {self.n_layers} layers; recurrent states of "
                    f"{self.n_fixed_layers} layers beside the pages, {mib:.2f} MiB fixed each "
                    "stream")
        mtp = (f" on {self.n_layers} layers, the MTP layer's included" if self.mtp_layers
               else "")
        if self.kind == "latent":
            return (f"latent rows ({self.arrays[0][1][1]} values a token and layer, the same "
                    f"on every rank){mtp}")
        if self.kind == "window":
            return (f"K and V rows of {len(self.paged_layers)} full layers a token, the "
                    f"{len(self.window_layers)} window layers' last {self.window} rows a stream")
        return f"K and V rows{mtp}" if mtp else "K and V rows"


def kv_spec(spec, shard) -> KVSpec:
    """The KV layout of a ModelSpec's shard (server/shapes/shard.py). MTP layers run
    (`spec.mtp_layers`, `--draft mtp`) write rows like a trunk layer's, after them: layer
    n_layers + j of the arrays (server/families/nextn.py)."""
    mtp = getattr(spec, "mtp_layers", 0)
    if getattr(spec, "index_kpool", 0):          # glm5next: DSA layers + MTP, KDA states
        latent = spec.n_kv_layers + spec.nextn_layers
        pooled = latent - len(spec.index_shared)
        return KVSpec.latent(latent, spec.kv_lora_rank, spec.qk_rope_head_dim).with_fixed(
            spec.n_layers - spec.n_kv_layers, gdn_fixed_part(spec, shard)).with_pooled(
            pooled, spec.index_head_dim, spec.index_kpool)
    if getattr(spec, "kv_lora_rank", 0):
        if getattr(spec, "recurrent", False):          # kimilinear: latent rows on the full
            return KVSpec.latent(spec.n_kv_layers, spec.kv_lora_rank,   # layers, KDA states
                                 spec.qk_rope_head_dim).with_fixed(     # beside the pages
                spec.n_layers - spec.n_kv_layers, gdn_fixed_part(spec, shard))
        return KVSpec.latent(spec.n_layers + mtp, spec.kv_lora_rank, spec.qk_rope_head_dim,
                             mtp)
    if getattr(spec, "recurrent", False):
        n_fixed = spec.n_layers - spec.n_kv_layers
        return KVSpec.mha(spec.n_kv_layers, shard.n_kv, spec.head_dim).with_fixed(
            n_fixed, gdn_fixed_part(spec, shard))
    if getattr(spec, "sliding_window", 0):
        return KVSpec.windowed(spec.n_layers, shard.n_kv, spec.head_dim, spec.sliding_window,
                               tuple(i for i in range(spec.n_layers) if spec.window(i)))
    return KVSpec.mha(spec.n_layers + mtp, shard.n_kv, spec.head_dim, mtp)


def gdn_fixed_part(spec, shard) -> tuple:
    """A stream's fixed part on this shard, per Gated DeltaNet layer: the recurrent state
    [v heads, k dim, v dim] and the conv window [kernel - 1, channels], channels = this
    shard's q and k dims (2 nk dk) and v dims (nv dv): its k heads and their v heads. A Kimi
    Delta Attention layer is the case of one v head a k head (state [H, D, D], conv window
    [K - 1, 3 H D])."""
    from server.shapes.shard import linear_heads
    lo, hi = linear_heads(spec, shard.tp, shard.rank)
    r = spec.lin_v_heads // spec.lin_k_heads
    nk, nv, dk, dv = hi - lo, (hi - lo) * r, spec.lin_k_dim, spec.lin_v_dim
    return (("state", (nv, dk, dv)), ("conv", (spec.conv_kernel - 1, 2 * nk * dk + nv * dv)))


def _prod(shape) -> int:
    k = 1
    for s in shape:
        k *= s
    return k
