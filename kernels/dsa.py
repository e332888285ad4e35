"""GLM-5.3-Flash's DSA indexer with pooled keys, over pages: the numpy definition.

A sparse (latent attention) layer attends, at position p, to the rows the indexer picks, not
to all of 0..p. The indexer scores keys **pooled** in groups of `kpool` tokens (pool m =
tokens m kpool .. m kpool + kpool - 1), as transformers' Glm5NextTextIndexer does:

    k_t      = LayerNorm(h_t @ wk^T)                  [Di]   (eps 1e-6, weight and bias)
    g_t      = h_t @ compress_gate^T                  [Di]
    pooled_m = sum_j softmax_j(g_{m kpool + j} + ape[j]) * k_{m kpool + j}   (per channel)
    q        = q_resid @ wq_b^T                       [Hi, Di]
    w        = (h @ weights_proj^T) * Hi^-0.5         [Hi]
    score_m  = sum_h w[h] relu((q[h] . pooled_m) Di^-0.5)

Pool m is a candidate of the query at p once it is complete and visible: (m + 1) kpool - 1
<= p, so n_p = (p + 1) // kpool candidates. The top K = index_topk // kpool of them are
chosen: by score, highest first, **ties broken by position: the earlier pool first** (one
fixed order: a stable sort on (-score, m)); then the **tail**, tokens n_p kpool .. p (the
incomplete pool), is always in. When n_p <= K every pool is chosen: the pass is dense (rows
0..p, no scoring), which is the case below index_topk + kpool - 1 rows. The chosen rows are
read in ascending position order. A "shared" layer has no indexer: it reuses the choice of
the previous "full" layer in the model, row for row (`Choice`).

Storage (kernels read both forms through (table, page rows); a window is one page of
`context` rows, so paged == window changes addresses only):
- the latent rows [pages, P, 1, C] as kernels/mla.py writes them (NoPE: C values a row);
- a full layer's pooled keys **in the page beside the rows they pool**: the array is
  [pages, P, 1, Di / kpool] (Di / kpool values a row, so the KV layout counts them a row),
  read as [pages, P / kpool, Di]: pool m is slot (m kpool mod P) / kpool of page
  table[m kpool // P]. P must be a multiple of kpool (a pool never straddles pages) and Di
  of kpool;
- a stream's **index ring** [kpool, 2, Di] (k_t and g_t at slot t mod kpool), a fixed part
  beside the KDA states: a pool's first tokens wait there until its last one is written,
  then the pooled key is computed from the ring in slot order and written to its page.

One fixed order, whatever the chunking or the batch: a pooled key depends on its pool's
tokens alone (softmax and sum over j in order); a score on the query and that pooled key
(kernels/matmul.py's tiles; the head sum the chain w[0] s[0] + w[1] s[1] + ...); so a prompt
in one chunk, in chunks of any size or token by token gives the same choices and bytes
(tests/model/test_dsa.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kernels import matmul

F32 = np.float32


def check_geometry(page_rows: int, kpool: int, head_dim: int) -> None:
    """Pools must not straddle pages, and a pooled key must be whole rows' worth of values."""
    if kpool < 2:
        raise ValueError(f"dsa: index_kpool = {kpool}; pooled keys need index_kpool >= 2")
    if page_rows % kpool:
        raise ValueError(f"dsa: page_rows = {page_rows} is not a multiple of index_kpool = "
                         f"{kpool} (a pool would straddle two pages)")
    if head_dim % kpool:
        raise ValueError(f"dsa: index_head_dim = {head_dim} is not a multiple of index_kpool "
                         f"= {kpool} (a page row holds index_head_dim / index_kpool values)")


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """x [T, D] -> [T, D] float32: (x - mean) / sqrt(var + eps) * w + b, per row."""
    mu = np.mean(x, axis=-1, keepdims=True, dtype=F32)
    d = (x - mu).astype(F32)
    var = np.mean(d * d, axis=-1, keepdims=True, dtype=F32)
    return (d / np.sqrt(var + F32(eps)) * w + b).astype(F32)


def index_keys(h: np.ndarray, wk_t: np.ndarray, ln_w, ln_b, gate_t: np.ndarray):
    """h [T, D] -> (k [T, Di], g [T, Di]): the indexer key and the pooling gate of each token
    (wk_t, gate_t: [D, Di], the weights transposed)."""
    return layer_norm(matmul.ref(h, wk_t), ln_w, ln_b), matmul.ref(h, gate_t)


def index_query(q_resid: np.ndarray, wq_t: np.ndarray, h: np.ndarray, wproj_t: np.ndarray,
                n_heads: int):
    """-> (q [T, Hi, Di], w [T, Hi]): the indexer's query heads and their weights."""
    T = h.shape[0]
    q = matmul.ref(q_resid, wq_t).reshape(T, n_heads, -1)
    w = (matmul.ref(h, wproj_t) * F32(n_heads ** -0.5)).astype(F32)
    return q, w


def pool_key(k: np.ndarray, g: np.ndarray, ape: np.ndarray) -> np.ndarray:
    """One pool's key [Di] from its tokens' k, g [kpool, Di] (in position order) and ape
    [kpool, Di]: per channel a softmax over the tokens of g + ape, then the weighted sum of k,
    each sum over the tokens in order."""
    logit = (g + ape).astype(F32)
    mx = logit[0]
    for j in range(1, logit.shape[0]):
        mx = np.maximum(mx, logit[j])
    e = np.exp(logit - mx).astype(F32)
    s = e[0]
    for j in range(1, e.shape[0]):
        s = s + e[j]
    out = (e[0] / s) * k[0]
    for j in range(1, e.shape[0]):
        out = out + (e[j] / s) * k[j]
    return out.astype(F32)


def pooled_view(pooled: np.ndarray, kpool: int) -> np.ndarray:
    """The pooled-key array [pages, P, 1, Di / kpool] as [pages, P // kpool, Di] (a view: the
    writes land in the pages). A window (one page of `context` rows) may hold a row count
    that is no multiple of kpool: its last P mod kpool rows' share is unused (the pools that
    rows reach are complete only past the window's end)."""
    pages, P, _, w = pooled.shape
    n = P // kpool
    v = pooled.reshape(pages, P * w)[:, :n * kpool * w].reshape(pages, n, kpool * w)
    assert v.base is not None and np.shares_memory(v, pooled)
    return v


def write(pooled: np.ndarray, ring: np.ndarray, table, page_rows: int, start: int,
          k: np.ndarray, g: np.ndarray, ape: np.ndarray) -> None:
    """A chunk's tokens start .. start + n - 1 into the stream's index ring [kpool, 2, Di]
    (slot t mod kpool), each completed pool's key into its page's slot, token by token."""
    kpool = ring.shape[0]
    view = pooled_view(pooled, kpool)
    for i in range(k.shape[0]):
        t = start + i
        ring[t % kpool, 0] = k[i]
        ring[t % kpool, 1] = g[i]
        if (t + 1) % kpool == 0:
            first = t + 1 - kpool
            view[table[first // page_rows], (first % page_rows) // kpool] = \
                pool_key(ring[:, 0], ring[:, 1], ape)


def gather_pooled(pooled: np.ndarray, table, page_rows: int, n: int, kpool: int) -> np.ndarray:
    """Pools 0 .. n - 1 of the stream as [n, Di] (from their pages, in pool order)."""
    view = pooled_view(pooled, kpool)
    per = page_rows // kpool
    out = np.empty((n, view.shape[2]), F32)
    m = 0
    while m < n:
        page, slot = table[m // per], m % per
        take = min(per - slot, n - m)
        out[m:m + take] = view[page, slot:slot + take]
        m += take
    return out


def choose(q: np.ndarray, w: np.ndarray, pooled: np.ndarray, table, page_rows: int, p: int,
           topk: int, kpool: int) -> np.ndarray:
    """The rows the query at position p reads (q [Hi, Di], w [Hi]): int64 positions,
    ascending. Dense (0..p) while the complete pools are at most topk // kpool."""
    n = (p + 1) // kpool
    K = topk // kpool
    if n <= K:
        return np.arange(p + 1, dtype=np.int64)
    keys = gather_pooled(pooled, table, page_rows, n, kpool)          # [n, Di]
    s = matmul.ref(np.ascontiguousarray(q, dtype=F32), np.ascontiguousarray(keys.T))
    s = np.maximum(s * F32(q.shape[1] ** -0.5), F32(0.0))             # [Hi, n]
    score = w[0] * s[0]
    for h in range(1, s.shape[0]):
        score = score + w[h] * s[h]
    order = np.lexsort((np.arange(n), -score))                        # by score, then position
    pools = np.sort(order[:K])
    rows = (pools[:, None] * kpool + np.arange(kpool)[None, :]).reshape(-1)
    return np.concatenate([rows, np.arange(n * kpool, p + 1)]).astype(np.int64)


@dataclass
class Choice:
    """A round's choices of one full layer, row by row (a shared layer reads them)."""
    rows: list          # per query row of the round: int64 positions


def attend(qa: np.ndarray, pool: np.ndarray, table, page_rows: int, positions, C: int,
           scale: float) -> np.ndarray:
    """Latent attention of one query row over the chosen rows: qa [H, C] (absorbed, NoPE),
    positions ascending -> o_lat [H, C]."""
    per = page_rows
    pos = np.asarray(positions, np.int64)
    R = pool[np.asarray(table)[pos // per], pos % per, 0]              # [L, C]
    s = matmul.ref(np.ascontiguousarray(qa, dtype=F32), np.ascontiguousarray(R.T)) * F32(scale)
    s = s - s.max(axis=-1, keepdims=True)
    e = np.exp(s)
    e = e / e.sum(axis=-1, keepdims=True)
    return matmul.ref(e.astype(F32), np.ascontiguousarray(R[:, :C]))


def choice_sources(layer_types, indexer_types) -> dict:
    """{sparse layer: the layer whose choice it reads}: a "full" layer its own, a "shared"
    one the nearest full sparse layer before it (KDA layers between are passed over); a
    shared layer with no full one before it is refused by name."""
    out, last = {}, None
    for i, t in enumerate(layer_types):
        if t != "indexed_attention":
            continue
        mode = indexer_types[i]
        if mode == "full":
            last = i
        elif mode != "shared":
            raise ValueError(f"dsa: indexer_types[{i}] = {mode!r}, not 'full' or 'shared'")
        if last is None:
            raise ValueError(f"dsa: layer {i} is a shared indexer layer with no full indexer "
                             "layer before it")
        out[i] = last
    return out


def round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, N, pool, rows, scale, ix, x, q_resid,
                 pooled, rings, n_heads, topk, kpool, choices_in=None):
    """A round's sparse latent attention (NoPE): q [T, H, N] (this rank's heads), ckv [T, C]
    -> ([T, H V], the round's choices: one int64 position array a row). A full layer (ix, its
    Indexer weights) writes its rows' latent rows and pooled keys (pooled [n, P, 1, Di /
    kpool], rings [streams, kpool, 2, Di]) chunk by chunk and chooses; a shared one (ix None)
    reads `choices_in`, the previous full layer's."""
    from kernels import rmsnorm
    T, H, _ = q.shape
    C = w_uk.shape[2]
    lat = rmsnorm.ref(np.ascontiguousarray(ckv[:, :C]), kv_norm, eps)[:, None, :]
    qa = np.empty((T, H, C), F32)
    for h in range(H):
        qa[:, h] = matmul.ref(np.ascontiguousarray(q[:, h, :N]), w_uk[h])
    if ix is not None:
        k, g = index_keys(x, ix.wk_t, ix.ln_w, ix.ln_b, ix.gate_t)
        iq, iw = index_query(q_resid, ix.wq_t, x, ix.wproj_t, n_heads)
    elif choices_in is None:
        raise ValueError("dsa: a shared indexer layer ran before any full one this round")
    choices = []
    o = np.empty((T, H, C), F32)
    for (a, b), c in zip(rows.spans, rows.chunks):
        from kernels import mla
        mla.write(pool, c.table, c.page_rows, c.start, lat[a:b])
        if ix is not None:
            if c.slot < 0:
                raise ValueError("dsa: a chunk without a stream slot reached an indexer; its "
                                 "index ring is kept a stream (RoundChunk.slot)")
            write(pooled, rings[c.slot], c.table, c.page_rows, c.start, k[a:b], g[a:b], ix.ape)
        for i in range(b - a):
            pos = (choose(iq[a + i], iw[a + i], pooled, c.table, c.page_rows, c.start + i,
                          topk, kpool) if ix is not None else choices_in[a + i])
            choices.append(pos)
            o[a + i] = attend(qa[a + i], pool, c.table, c.page_rows, pos, C, scale)
    V = w_uv_t.shape[2]
    out = np.empty((T, H, V), F32)
    for h in range(H):
        out[:, h] = matmul.ref(np.ascontiguousarray(o[:, h]), w_uv_t[h])
    return out.reshape(T, H * V), choices
