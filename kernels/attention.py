"""Causal attention of a chunk's query rows over a stream's KV rows, read through its table.

Each query row at position p attends to exactly rows 0..p: the shapes (and so the
summation order) depend on p alone, never on the chunk it came in, the other streams of
the round, or where the pages lie. That is what makes paged == window, solo ==
concurrent and resumed == fresh hold byte for byte.
"""
from __future__ import annotations

import numpy as np

# head dims the GPU kernel (attention_cuda) is built for; checked when a model opens on a GPU
GPU_HEAD_DIMS = (64, 128)


def gather_rows(pool: np.ndarray, table, page_rows: int, n: int) -> np.ndarray:
    """Rows 0..n-1 of a stream as one [n, KV, hd] array (a view when they lie in one page)."""
    pages = -(-n // page_rows)
    if pages == 1:
        return pool[table[0], :n]
    return pool[list(table[:pages])].reshape(-1, *pool.shape[2:])[:n]


def ref(q: np.ndarray, k_pool: np.ndarray, v_pool: np.ndarray, table, page_rows: int,
        start: int, scale: float) -> np.ndarray:
    # q: [n, Hq, hd] at positions start .. start+n-1; pools: [n_pages, P, KV, hd] -> [n, Hq, hd]
    n, hq, hd = q.shape
    kv = k_pool.shape[2]
    group = hq // kv
    last = start + n
    K = np.ascontiguousarray(gather_rows(k_pool, table, page_rows, last).transpose(1, 2, 0))  # [KV, hd, L]
    V = np.ascontiguousarray(gather_rows(v_pool, table, page_rows, last).transpose(1, 0, 2))  # [KV, L, hd]
    out = np.empty((n, hq, hd), dtype=np.float32)
    qg = q.reshape(n, kv, group, hd)
    for i in range(n):
        L = start + i + 1
        s = np.matmul(qg[i], K[:, :, :L]) * np.float32(scale)       # [KV, G, L]
        s = s - s.max(axis=-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(axis=-1, keepdims=True)
        out[i] = np.matmul(w, V[:, :L]).reshape(hq, hd)             # [KV, G, hd]
    return out
