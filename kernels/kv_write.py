"""Write a chunk's K and V rows through a stream's page table.

  row r of the stream  ->  pool[table[r // P], r % P]

On whole windows the table is one page of `context` rows (the stream's window), so the
same code writes both forms: only the addresses differ.
"""
from __future__ import annotations

import numpy as np


def ref(k_pool: np.ndarray, v_pool: np.ndarray, table, page_rows: int, start: int,
        k: np.ndarray, v: np.ndarray) -> None:
    # k_pool, v_pool: [n_pages, P, KV, hd]; k, v: [n, KV, hd]; rows start .. start+n-1
    n = k.shape[0]
    r = start
    while r < start + n:
        page, off = table[r // page_rows], r % page_rows
        take = min(page_rows - off, start + n - r)
        k_pool[page, off:off + take] = k[r - start:r - start + take]
        v_pool[page, off:off + take] = v[r - start:r - start + take]
        r += take
