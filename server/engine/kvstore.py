"""The KV rows of one rank: a pool of pages, or a window a stream, one array per array of
the model's KV layout spec (server/shapes/kv_layout.py):

  mha:      K[layer], V[layer] : [pages,   page_rows, KV, hd]   stream table = its page ids
  latent:   K[layer]           : [pages,   page_rows, 1, kv_lora_rank + rope dims]  (V None)
  windows:  the same with [streams, context, ...]: stream table = (stream,), one page of
            `context` rows
  window kind (gpt-oss): K, V above hold the full layers only (K[j] is model layer
            paged_layers[j]); each window layer's rows are in a ring a stream,
            RK[layer], RV[layer] : [streams * k, page_rows, KV, hd], stream s owning ring pages
            s*k .. s*k + k - 1, row p in page s*k + (p // page_rows) % k (ring_table). Pages
            and windows alike: the window layers read the same rings in both.
The kernels read both through (table, page_rows): only addresses differ.
On windows a prompt cache keeps copies of rows in `cache` pages of page_rows rows.

The layout's fixed part (recurrent layers' states and conv windows) is one float32 array per
entry, [recurrent layers, streams, *shape], indexed by the stream's slot in both modes: a
stream's state never lives on pages, so paged == window holds for it by construction.
Snapshot slots (the prompt cache's kept states, `snaps` of them) are the same arrays again,
[recurrent layers, slots, *shape], named by rank 0's slot ids (server/ranks/steps.SnapStep).
"""
from __future__ import annotations

from server.shapes.kv_layout import KVSpec


class KVStore:
    def __init__(self, xp, n_layers, nkv, hd, dtype, *, paged, pages, page_rows, streams,
                 context, cache_pages=0, layout: KVSpec | None = None, verify: int = 1,
                 snaps: int = 0):
        """layout: the KV layout spec (None: MHA of n_layers, nkv, hd); verify: the verify
        window (the window kind's rings hold it: KVSpec.ring_pages)."""
        self.xp, self.paged, self.page_rows, self.context = xp, paged, page_rows, context
        self.layout = layout or KVSpec.mha(n_layers, nkv, hd)
        n, rows = (pages, page_rows) if paged else (streams, context)
        lay = self.layout
        L = len(lay.paged_layers)
        self.arrays = [xp.empty((L, n, rows, *shape), dtype=dtype) for _, shape in lay.arrays]
        # model layer -> index in the arrays above (None: every layer, in order)
        self.paged_index = ({li: j for j, li in enumerate(lay.paged_layers)}
                            if lay.window_layers else None)
        self.streams, self.ring_k = streams, lay.ring_pages(page_rows, verify)
        self.rings = [xp.empty((len(lay.window_layers), streams * self.ring_k, page_rows, *shape),
                               dtype=dtype) for _, shape in lay.arrays] if lay.window_layers else []
        self.ring_index = {li: j for j, li in enumerate(lay.window_layers)}
        self.cache = []
        if not paged and cache_pages:
            self.cache = [xp.empty((L, cache_pages, page_rows, *shape), dtype=dtype)
                          for _, shape in self.layout.arrays]
        self.K = self.arrays[0]
        self.V = self.arrays[1] if len(self.arrays) > 1 else None
        self.cK = self.cache[0] if self.cache else None
        self.cV = self.cache[1] if len(self.cache) > 1 else None
        import numpy as np                 # the fixed part is float32 on every device
        self.fixed = [xp.zeros((self.layout.n_fixed_layers, streams, *shape), dtype=np.float32)
                      for _, shape in self.layout.fixed] if self.layout.fixed else []
        if snaps and not self.layout.fixed:
            raise ValueError(f"{snaps} snapshot slots asked for a layout without a fixed part "
                             "(snap_bytes 0: no slots)")
        self.snaps = [xp.zeros((self.layout.n_fixed_layers, snaps, *shape), dtype=np.float32)
                      for _, shape in self.layout.fixed] if snaps else []
        # pooled indexer keys (GLM-5.3-Flash): beside the latent rows, on the same pages /
        # windows, [pooled layers, n, rows, 1, Di / kpool]; the index rings in the fixed part
        lp = self.layout.n_pooled_layers
        self.pooled = [xp.empty((lp, n, rows, *shape), dtype=dtype)
                       for _, shape in self.layout.pooled] if lp else []
        self.index_rings = [xp.zeros((lp, streams, *shape), dtype=np.float32)
                            for _, shape in self.layout.rings] if lp else []
        # the prompt cache on windows keeps the pooled keys of its pages too (a page's
        # rows / kpool pools, in the page beside the latent rows they pool)
        self.pooled_cache = [xp.empty((lp, cache_pages, page_rows, *shape), dtype=dtype)
                             for _, shape in self.layout.pooled] if lp and self.cache else []

    @classmethod
    def of(cls, xp, layout: KVSpec, dtype, **kw) -> "KVStore":
        return cls(xp, layout.n_layers, 0, 0, dtype, layout=layout, **kw)

    @property
    def nbytes(self) -> int:
        return (sum(a.nbytes for a in self.arrays) + sum(a.nbytes for a in self.cache)
                + sum(a.nbytes for a in self.rings) + sum(a.nbytes for a in self.fixed)
                + sum(a.nbytes for a in self.snaps)
                + sum(a.nbytes for a in self.pooled) + sum(a.nbytes for a in self.index_rings)
                + sum(a.nbytes for a in self.pooled_cache))

    def pooled_of(self, j: int):
        """Pooled-key layer j's array [n, rows, 1, Di / kpool] (kernels/dsa.py reads it as
        [n, rows / kpool, Di])."""
        return self.pooled[0][j]

    def index_ring_of(self, j: int):
        """Pooled-key layer j's index rings [streams, kpool, 2, Di] (a stream's slot each)."""
        return self.index_rings[0][j]

    def fixed_of(self, layer: int) -> tuple:
        """The fixed part's arrays of recurrent layer `layer` (its index among the recurrent
        layers), each [streams, *shape]: (state, conv window) for Gated DeltaNet."""
        return tuple(a[layer] for a in self.fixed)

    def snaps_of(self, layer: int) -> tuple:
        """The snapshot slots' arrays of recurrent layer `layer`, each [slots, *shape]
        (() without slots)."""
        return tuple(a[layer] for a in self.snaps)

    @property
    def n_snaps(self) -> int:
        return self.snaps[0].shape[1] if self.snaps else 0

    def restore(self, stream: int, slot: int) -> None:
        """A stream's fixed part := snapshot slot `slot`'s (every recurrent layer); its index
        rings zeroed (a slot stands at a pool boundary, where they hold nothing read again:
        KVSpec.snap_bytes)."""
        for a, s in zip(self.fixed, self.snaps):
            a[:, stream] = s[:, slot]
        for a in self.index_rings:
            a[:, stream] = 0

    def copy_snap(self, src: int, dst: int) -> None:
        for s in self.snaps:
            s[:, dst] = s[:, src]

    def reset_fixed(self, stream: int) -> None:
        """A stream starting at position 0: its states, windows and index rings zeroed."""
        for a in self.fixed + self.index_rings:
            a[:, stream] = 0

    def is_ring(self, layer) -> bool:
        """Whether model layer `layer` keeps its rows in the streams' rings (window kind)."""
        return layer in self.ring_index

    def k(self, layer):
        """MHA: layer's K pool; latent: layer's latent pool [n, rows, 1, width]; a window
        layer: its ring pool [streams * k, page_rows, KV, hd] (read through ring_table)."""
        if self.ring_index and layer in self.ring_index:
            return self.rings[0][self.ring_index[layer]]
        return self.K[layer if self.paged_index is None else self.paged_index[layer]]

    def v(self, layer):
        if self.ring_index and layer in self.ring_index:
            return self.rings[1][self.ring_index[layer]]
        if self.V is None:
            return None
        return self.V[layer if self.paged_index is None else self.paged_index[layer]]

    def ring_table(self, stream: int, rows: int) -> tuple:
        """The ring's page ids of a stream's rows 0 .. rows-1, row order (() without rings):
        row p in ring page stream*k + (p // page_rows) % k."""
        if not self.rings:
            return ()
        if not 0 <= stream < self.streams:
            raise ValueError(f"stream {stream} outside the store's {self.streams} streams' rings")
        k, base = self.ring_k, stream * self.ring_k
        return tuple(base + j % k for j in range(-(-rows // self.page_rows)))

    def address(self, stream: int, page_ids):
        """(table, rows per page) of a stream."""
        if self.paged:
            return tuple(page_ids), self.page_rows
        return (stream,), self.context

    def poison(self, stream: int, page_ids, kept: int) -> None:
        """NaN into what a stream is about to use, past its kept prefix, and into its fixed
        part's slot (reset_fixed then zeroes it: a stream that skipped it reads NaN)."""
        for a in self.fixed + self.index_rings:
            a[:, stream] = float("nan")
        for a in self.arrays + self.pooled:
            nan = float("nan")
            if a.dtype.itemsize == 2:       # bf16/fp16 on the GPU: 0x7FC0 is NaN in both
                nan, a = 0x7FC0, a.view(self.xp.uint16)
            if self.paged:
                fresh = list(page_ids[kept:])
                if fresh:
                    a[:, self.xp.asarray(fresh)] = nan
            else:
                a[:, stream] = nan
        for a in self.rings:                     # a stream's ring is never kept
            nan = float("nan")
            if a.dtype.itemsize == 2:
                nan, a = 0x7FC0, a.view(self.xp.uint16)
            a[:, stream * self.ring_k:(stream + 1) * self.ring_k] = nan

    def copy_window_pages(self, stream: int, page_ids, rows: int, to_pages: bool) -> None:
        """Prompt cache on windows: window rows [0, rows) <-> cache pages, page by page
        (a page id of -1 is one the cache already keeps: skipped)."""
        P = self.page_rows
        for i, pid in enumerate(page_ids):
            a = i * P
            b = min(a + P, rows)
            if a >= b:
                break
            if pid < 0:                        # already kept, same rows: nothing to copy
                continue
            for arr, c in zip(self.arrays + self.pooled, self.cache + self.pooled_cache):
                if to_pages:
                    c[:, pid, : b - a] = arr[:, stream, a:b]
                else:
                    arr[:, stream, a:b] = c[:, pid, : b - a]
