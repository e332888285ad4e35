"""The KV rows of one rank: a pool of pages, or a window a stream, in one array per K and V.

  pages:    k[layer] : [pages,   page_rows, KV, hd]   stream table = its page ids
  windows:  k[layer] : [streams, context,   KV, hd]   stream table = (stream,), one page of
                                                      `context` rows
The kernels read both through (table, page_rows): only addresses differ.
On windows a prompt cache keeps copies of rows in `cache` pages of page_rows rows.
"""
from __future__ import annotations


class KVStore:
    def __init__(self, xp, n_layers, nkv, hd, dtype, *, paged, pages, page_rows, streams,
                 context, cache_pages=0):
        self.xp, self.paged, self.page_rows, self.context = xp, paged, page_rows, context
        n, rows = (pages, page_rows) if paged else (streams, context)
        self.K = xp.empty((n_layers, n, rows, nkv, hd), dtype=dtype)
        self.V = xp.empty((n_layers, n, rows, nkv, hd), dtype=dtype)
        self.cK = self.cV = None
        if not paged and cache_pages:
            self.cK = xp.empty((n_layers, cache_pages, page_rows, nkv, hd), dtype=dtype)
            self.cV = xp.empty((n_layers, cache_pages, page_rows, nkv, hd), dtype=dtype)

    @property
    def nbytes(self) -> int:
        extra = 0 if self.cK is None else self.cK.nbytes * 2
        return self.K.nbytes * 2 + extra

    def k(self, layer):
        return self.K[layer]

    def v(self, layer):
        return self.V[layer]

    def address(self, stream: int, page_ids):
        """(table, rows per page) of a stream."""
        if self.paged:
            return tuple(page_ids), self.page_rows
        return (stream,), self.context

    def poison(self, stream: int, page_ids, kept: int) -> None:
        """NaN into what a stream is about to use, past its kept prefix."""
        nan = float("nan")
        K, V = self.K, self.V
        if K.dtype.itemsize == 2:           # bf16/fp16 on the GPU: 0x7FC0 is NaN in both
            nan, K, V = 0x7FC0, K.view(self.xp.uint16), V.view(self.xp.uint16)
        if self.paged:
            fresh = list(page_ids[kept:])
            if fresh:
                idx = self.xp.asarray(fresh)
                K[:, idx] = nan
                V[:, idx] = nan
        else:
            K[:, stream] = nan
            V[:, stream] = nan

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
            if to_pages:
                self.cK[:, pid, : b - a] = self.K[:, stream, a:b]
                self.cV[:, pid, : b - a] = self.V[:, stream, a:b]
            else:
                self.K[:, stream, a:b] = self.cK[:, pid, : b - a]
                self.V[:, stream, a:b] = self.cV[:, pid, : b - a]
