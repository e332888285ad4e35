"""The KV rows of one rank: a pool of pages, or a window a stream, one array per array of
the model's KV layout spec (server/shapes/kv_layout.py):

  mha:      K[layer], V[layer] : [pages,   page_rows, KV, hd]   stream table = its page ids
  latent:   K[layer]           : [pages,   page_rows, 1, kv_lora_rank + rope dims]  (V None)
  windows:  the same with [streams, context, ...]: stream table = (stream,), one page of
            `context` rows
The kernels read both through (table, page_rows): only addresses differ.
On windows a prompt cache keeps copies of rows in `cache` pages of page_rows rows.
"""
from __future__ import annotations

from server.shapes.kv_layout import KVSpec


class KVStore:
    def __init__(self, xp, n_layers, nkv, hd, dtype, *, paged, pages, page_rows, streams,
                 context, cache_pages=0, layout: KVSpec | None = None):
        """layout: the KV layout spec (None: MHA of n_layers, nkv, hd)."""
        self.xp, self.paged, self.page_rows, self.context = xp, paged, page_rows, context
        self.layout = layout or KVSpec.mha(n_layers, nkv, hd)
        n, rows = (pages, page_rows) if paged else (streams, context)
        L = self.layout.n_layers
        self.arrays = [xp.empty((L, n, rows, *shape), dtype=dtype) for _, shape in self.layout.arrays]
        self.cache = []
        if not paged and cache_pages:
            self.cache = [xp.empty((L, cache_pages, page_rows, *shape), dtype=dtype)
                          for _, shape in self.layout.arrays]
        self.K = self.arrays[0]
        self.V = self.arrays[1] if len(self.arrays) > 1 else None
        self.cK = self.cache[0] if self.cache else None
        self.cV = self.cache[1] if len(self.cache) > 1 else None

    @classmethod
    def of(cls, xp, layout: KVSpec, dtype, **kw) -> "KVStore":
        return cls(xp, layout.n_layers, 0, 0, dtype, layout=layout, **kw)

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.arrays) + sum(a.nbytes for a in self.cache)

    def k(self, layer):
        """MHA: layer's K pool; latent: layer's latent pool [n, rows, 1, width]."""
        return self.K[layer]

    def v(self, layer):
        return None if self.V is None else self.V[layer]

    def address(self, stream: int, page_ids):
        """(table, rows per page) of a stream."""
        if self.paged:
            return tuple(page_ids), self.page_rows
        return (stream,), self.context

    def poison(self, stream: int, page_ids, kept: int) -> None:
        """NaN into what a stream is about to use, past its kept prefix."""
        for a in self.arrays:
            nan = float("nan")
            if a.dtype.itemsize == 2:       # bf16/fp16 on the GPU: 0x7FC0 is NaN in both
                nan, a = 0x7FC0, a.view(self.xp.uint16)
            if self.paged:
                fresh = list(page_ids[kept:])
                if fresh:
                    a[:, self.xp.asarray(fresh)] = nan
            else:
                a[:, stream] = nan

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
            for arr, c in zip(self.arrays, self.cache):
                if to_pages:
                    c[:, pid, : b - a] = arr[:, stream, a:b]
                else:
                    arr[:, stream, a:b] = c[:, pid, : b - a]
