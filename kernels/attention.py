"""Causal attention of a chunk's query rows over a stream's KV rows, read through its table.

Each query row at position p attends to exactly rows 0..p (a sliding-window layer: its last
`window` rows, max(0, p - window + 1)..p): the shapes (and so the
summation order) depend on p alone, never on the chunk it came in, the other streams of
the round, or where the pages lie. That is what makes paged == window, solo ==
concurrent and resumed == fresh hold byte for byte.
"""
from __future__ import annotations

import numpy as np

# head dims the GPU kernel (attention_cuda) is built for; checked when a model opens on a GPU
GPU_HEAD_DIMS = (64, 128)


def gather_rows(pool: np.ndarray, table, page_rows: int, n: int, first: int = 0) -> np.ndarray:
    """Rows first..n-1 of a stream as one [n - first, KV, hd] array (a view when they lie in
    one page)."""
    p0 = first // page_rows
    pages = -(-n // page_rows)
    a, b = first - p0 * page_rows, n - p0 * page_rows
    if pages - p0 == 1:
        return pool[table[p0], a:b]
    return pool[list(table[p0:pages])].reshape(-1, *pool.shape[2:])[a:b]


def ref(q: np.ndarray, k_pool: np.ndarray, v_pool: np.ndarray, table, page_rows: int,
        start: int, scale: float, sinks=None, window: int = 0) -> np.ndarray:
    """q: [n, Hq, hd] at positions start .. start+n-1; pools: [n_pages, P, KV, hd] -> [n, Hq, hd].

    window > 0 (a sliding-window layer, gpt-oss): the row at position p reads keys
    max(0, p - window + 1) .. p only (its last `window` rows, itself included), one fixed
    order by position as the full form's. sinks [Hq] float32 (gpt-oss's attention sinks): a
    learned logit a head adds to the softmax's denominator and nothing to the numerator:
        m = max(max_j s_j, sink);  w_j = exp(s_j - m) / (sum_j exp(s_j - m) + exp(sink - m))
    """
    n, hq, hd = q.shape
    kv = k_pool.shape[2]
    group = hq // kv
    last = start + n
    base = max(0, start - window + 1) if window else 0     # the first row any query reads
    K = np.ascontiguousarray(gather_rows(k_pool, table, page_rows, last, base).transpose(1, 2, 0))
    V = np.ascontiguousarray(gather_rows(v_pool, table, page_rows, last, base).transpose(1, 0, 2))
    out = np.empty((n, hq, hd), dtype=np.float32)
    qg = q.reshape(n, kv, group, hd)
    sk = None if sinks is None else np.asarray(sinks, np.float32).reshape(kv, group, 1)
    for i in range(n):
        L = start + i + 1
        lo = max(0, L - window) if window else 0
        s = np.matmul(qg[i], K[:, :, lo - base:L - base]) * np.float32(scale)    # [KV, G, L - lo]
        if sk is None:
            s = s - s.max(axis=-1, keepdims=True)
            w = np.exp(s)
            w = w / w.sum(axis=-1, keepdims=True)
        else:
            mx = np.maximum(s.max(axis=-1, keepdims=True), sk)
            w = np.exp(s - mx)
            w = w / (w.sum(axis=-1, keepdims=True) + np.exp(sk - mx))
        out[i] = np.matmul(w, V[:, lo - base:L - base]).reshape(hq, hd)           # [KV, G, hd]
    return out
