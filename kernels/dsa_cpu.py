"""GLM-5.3-Flash's sparse latent attention on the CPU in numba: the DSA indexer's choice and
the absorbed latent attention over the chosen rows (kernels.ops.dsa_attend where numba loads).
The numpy definition is kernels/dsa.py; this is its contract in its own fixed arithmetic.

**Which bytes.** What stays the definition's, byte for byte: the latent rows (rmsnorm of
c_kv, kernels/rmsnorm.ref) and their writes, the indexer's keys, gates and head weights
(kernels/matmul.ref's 4-row tiles, kernels/dsa.index_keys), the index ring and every pooled
key (kernels/dsa.write): so the pages hold the same bytes whichever backend wrote them. What
is this file's: the indexer's query heads (index_query: dot16 chains over q_lora, the weight
in cache-sized blocks), the pool scores, the choice's order among equal scores
(the same rule: the earlier pool first), and the attention over the chosen rows, whose
products no numba code can copy from OpenBLAS; held to the definition within float32
rounding (tests/model/test_dsa_cpu.py), the family to its references under the golden rule.

For each query row t at position p, alone (never depending on another row, the round, the
chunk, where the pages lie or how many heads this rank holds):

    n        = (p + 1) // kpool complete pools, K = topk // kpool
    rows     = 0 .. p when n <= K (dense: a round whose every row is dense computes no query
               heads and no scores, `all_dense`; what it writes and chooses is the same); else
    sh[h]    = dot16(pooled_m, q[h])        every pool m < n, every indexer head h
    score_m  = w[0] relu(sh[0] Di^-0.5) + w[1] relu(sh[1] Di^-0.5) + ...   (in head order)
    pools    = the K best by score, ties: the earlier pool (a stable sort of -score), then in
               ascending order; rows = their rows, then the tail n kpool .. p
    then for each head h of this rank:
    qa[c]    = sum_n q_nope[h, n] W_UK[h][n, c]      one fma chain over n in order (axpy16)
    s_j      = dot16(qa, row_j)             j over the chosen rows in ascending position
    w        = softmax16(s * scale)         kernels/vec_ir.softmax16 (exp_ir, 16-lane sums)
    o[c]     = sum_j w_j row_j[c]           one fma chain over j in order
    out[v]   = sum_c o[c] W_UV^T[h][c, v]   one fma chain over c in order

(dot16, axpy16, softmax16: kernels/vec_ir.py's chains.) Jobs are (a block of ROW_BLOCK rows,
a block of heads): a decode row's heads split over the threads, a prefill chunk's rows in
blocks with every head (each W_UK[h] and W_UV^T[h] read once for the block's rows, a row's
chosen rows gathered once for the block's heads); the cut changes the speed only. Widths (C, V, index_head_dim) must be multiples of 16 (else the definition
runs: `fits`).
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numba
import numpy as np
from numba import njit, prange

from kernels import dsa, matmul, mla, rmsnorm
from kernels.vec_ir import axpy_rows16, dot_rows16, softmax16

F32 = np.float32
ROW_BLOCK = 16            # query rows a job takes (its heads' W_UK / W_UV^T read once for them)


def fits(C: int, V: int, Di: int) -> bool:
    """Whether this kernel takes the widths (each a multiple of 16)."""
    return C % 16 == 0 and V % 16 == 0 and Di % 16 == 0


_ROWS: dict = {}          # id(wq_t) -> (wq_t, its rows [Hi Di, q_lora] contiguous)
JB = 64                   # W rows a block in _dot_blocks (64 x 1536 float32: 384 KiB, in L2)


def index_query(q_resid, wq_t, h, wproj_t, n_heads):
    """kernels/dsa.index_query's contract (q [T, Hi, Di], w [T, Hi]): q's elements as dot16
    chains over q_lora (_dot_blocks: the weight read once a block for every row), w by the
    definition (kernels/matmul.ref: a small product). A q_lora that is no multiple of 16 (the
    tiny test shapes) takes the definition's q too."""
    if wq_t.shape[0] % 16:
        return dsa.index_query(q_resid, wq_t, h, wproj_t, n_heads)
    got = _ROWS.get(id(wq_t))
    if got is None or got[0] is not wq_t:
        got = _ROWS[id(wq_t)] = (wq_t, np.ascontiguousarray(np.asarray(wq_t, F32).T))
    wq = got[1]
    T = q_resid.shape[0]
    q = np.empty((T, wq.shape[0]), F32)
    _dot_blocks(np.ascontiguousarray(q_resid, dtype=F32), wq, q, JB)
    w = (matmul.ref(h, wproj_t) * F32(n_heads ** -0.5)).astype(F32)
    return q.reshape(T, n_heads, -1), w


@njit(cache=True, boundscheck=False, nogil=True, parallel=True)
def _dot_blocks(x, w, out, JB):
    """out[t, j] = dot16(x[t], w[j]) (x [T, K], w [J, K] rows, K a multiple of 16): w in blocks
    of JB rows (a block stays in cache while every row of x reads it), blocks in parallel; each
    element one chain whatever the block or the thread."""
    T, J = x.shape[0], w.shape[0]
    for b in prange((J + JB - 1) // JB):
        j0 = b * JB
        j1 = min(J, j0 + JB)
        for t in range(T):
            dot_rows16(x[t], w[j0:j1], out[t, j0:j1])


@njit(cache=True, boundscheck=False, nogil=True)
def _choose_row(t, p, tab, per, q, w, pooled, topk, kpool, key, sh, out_pos):
    """The chosen rows of row t (position p, its chunk's table tab, per pools a page) into
    out_pos[t]; returns their count."""
    n = (p + 1) // kpool
    K = topk // kpool
    if n <= K:
        for j in range(p + 1):
            out_pos[t, j] = j
        return p + 1
    Hi, Di = q.shape[1], q.shape[2]
    sc = np.float32(Di ** -0.5)
    neg = np.empty(n, np.float32)
    zero = np.float32(0.0)
    for m in range(n):
        src = pooled[tab[m // per], m % per]
        for d in range(Di):
            key[d] = src[d]
        dot_rows16(key, q[t], sh)
        acc = w[t, 0] * max(sh[0] * sc, zero)
        for h in range(1, Hi):
            acc = acc + w[t, h] * max(sh[h] * sc, zero)
        neg[m] = -acc
    order = np.argsort(neg, kind="mergesort")          # stable: equal scores, earlier pool first
    pools = np.sort(order[:K])
    c = 0
    for i in range(K):
        base = pools[i] * kpool
        for j in range(kpool):
            out_pos[t, c] = base + j
            c += 1
    for j in range(n * kpool, p + 1):
        out_pos[t, c] = j
        c += 1
    return c


@njit(cache=True, boundscheck=False, nogil=True, parallel=True)
def _choose(pos, owner, tables, page_rows, q, w, pooled, topk, kpool, out_pos, count):
    T = pos.shape[0]
    Di = q.shape[2]
    for t in prange(T):
        key = np.empty(Di, np.float32)
        sh = np.empty(q.shape[1], np.float32)
        ch = owner[t]
        count[t] = _choose_row(np.int64(t), pos[t], tables[ch], page_rows[ch] // kpool, q, w, pooled, topk,
                               kpool, key, sh, out_pos)


@njit(cache=True, boundscheck=False, nogil=True)
def _job(job, n_hb, HB, qn, w_uk, w_uv_t, pool, out_pos, count, owner, tables, page_rows, scale,
         out):
    """Rows rb ROW_BLOCK .. of the block, heads h0 .. h1: every row's qa for the block's heads
    first (each W_UK[h] read once for the block's rows), then a row at a time its chosen rows
    gathered once for all the block's heads, then the expansion (each W_UV^T[h] once)."""
    T, H = qn.shape[0], qn.shape[1]
    t0 = (job // n_hb) * ROW_BLOCK
    t1 = min(T, t0 + ROW_BLOCK)
    h0 = (job % n_hb) * HB
    h1 = min(H, h0 + HB)
    if h0 >= h1:
        return
    C = w_uk.shape[2]
    V = w_uv_t.shape[2]
    nb, nh = t1 - t0, h1 - h0
    qa = np.zeros((nb, nh, C), np.float32)
    o = np.zeros((nb, nh, C), np.float32)
    for h in range(h0, h1):
        for t in range(t0, t1):
            axpy_rows16(qa[t - t0, h - h0], qn[t, h], w_uk[h])
    Lmax = 0
    for t in range(t0, t1):
        Lmax = max(Lmax, count[t])
    R = np.empty((Lmax, C), np.float32)
    s = np.empty((Lmax + 15) // 16 * 16, np.float32)
    for t in range(t0, t1):
        L = count[t]
        Lp = (L + 15) // 16 * 16
        ch = owner[t]
        P = page_rows[ch]
        for j in range(L):
            x = out_pos[t, j]
            src = pool[tables[ch, x // P], x % P, 0]
            for c in range(C):
                R[j, c] = src[c]
        Rt = R[:L]
        st = s[:Lp]
        for h in range(nh):
            dot_rows16(qa[t - t0, h], Rt, st)
            for j in range(L, Lp):
                st[j] = np.float32(-np.inf)
            softmax16(st, scale)
            axpy_rows16(o[t - t0, h], st, Rt)
    ov = np.zeros(V, np.float32)
    for h in range(h0, h1):
        for t in range(t0, t1):
            for v in range(V):
                ov[v] = np.float32(0.0)
            axpy_rows16(ov, o[t - t0, h - h0], w_uv_t[h])
            for v in range(V):
                out[t, h * V + v] = ov[v]


@njit(cache=True, boundscheck=False, nogil=True, parallel=True)
def _attend_par(n_jobs, n_hb, HB, qn, w_uk, w_uv_t, pool, out_pos, count, owner, tables,
                page_rows, scale, out):
    for j in prange(n_jobs):
        _job(np.int64(j), n_hb, HB, qn, w_uk, w_uv_t, pool, out_pos, count, owner, tables, page_rows,
             scale, out)


@njit(cache=True, boundscheck=False, nogil=True)
def _attend_ser(n_jobs, n_hb, HB, qn, w_uk, w_uv_t, pool, out_pos, count, owner, tables,
                page_rows, scale, out):
    for j in range(n_jobs):
        _job(j, n_hb, HB, qn, w_uk, w_uv_t, pool, out_pos, count, owner, tables, page_rows,
             scale, out)


def cut(T: int, H: int, threads: int) -> tuple[int, int]:
    """(head blocks, heads a block): enough jobs for the threads (a decode row's heads split)."""
    n_rb = -(-max(T, 1) // ROW_BLOCK)
    n_hb = max(1, min(H, -(-threads // n_rb)))
    HB = -(-H // n_hb)
    return -(-H // HB), HB


DENSE_SHORTCUT = True     # tests turn it off to compare with the scored path


def all_dense(pos, topk: int, kpool: int) -> bool:
    """Whether every row (positions pos) is in the dense pass: (p + 1) // kpool complete pools
    at most topk // kpool (kernels/dsa.choose's rule), so its rows are 0 .. p."""
    return bool(((pos + 1) // kpool <= topk // kpool).all())


def round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, N, pool, rows, scale, ix, x, q_resid,
                 pooled, rings, n_heads, topk, kpool, choices_in=None, cut_to=None,
                 parallel=None):
    """kernels/dsa.round_attend's contract, this file's arithmetic: q [T, H, N] (this rank's
    heads), ckv [T, C], W_UK [H, N, C], W_UV^T [H, C, V] (float32) -> ([T, H V], the round's
    choices: one int64 position array a row). A full layer (ix) writes its rows' latent rows
    and pooled keys (the definition's writes) and chooses; a shared one (ix None) reads
    `choices_in`. `cut_to` and `parallel` override the job cut and the region (tests)."""
    T, H, _ = q.shape
    C = w_uk.shape[2]
    V = w_uv_t.shape[2]
    if w_uk.shape[1] != N or w_uv_t.shape[1] != C or w_uk.shape[0] != H or w_uv_t.shape[0] != H:
        raise ValueError(f"dsa_cpu: W_UK {w_uk.shape} / W_UV^T {w_uv_t.shape} are not "
                         f"[{H}, {N}, C] / [{H}, C, V]")
    lat = rmsnorm.ref(np.ascontiguousarray(ckv[:, :C]), kv_norm, eps)[:, None, :]
    if ix is None and choices_in is None:
        raise ValueError("dsa: a shared indexer layer ran before any full one this round")
    chunks = list(rows.chunks)
    width = max(len(c.table) for c in chunks)
    tables = np.zeros((len(chunks), width), np.int64)
    owner = np.empty(T, np.int64)
    pos = np.empty(T, np.int64)
    if ix is not None:
        k, g = dsa.index_keys(x, ix.wk_t, ix.ln_w, ix.ln_b, ix.gate_t)
    for i, ((a, b), c) in enumerate(zip(rows.spans, chunks)):
        tables[i, :len(c.table)] = c.table
        owner[a:b] = i
        pos[a:b] = np.arange(c.start, c.start + b - a)
        mla.write(pool, c.table, c.page_rows, c.start, lat[a:b])
        if ix is not None:
            if c.slot < 0:
                raise ValueError("dsa: a chunk without a stream slot reached an indexer; its "
                                 "index ring is kept a stream (RoundChunk.slot)")
            dsa.write(pooled, rings[c.slot], c.table, c.page_rows, c.start, k[a:b], g[a:b], ix.ape)
    page_rows = np.asarray([c.page_rows for c in chunks], np.int64)
    if ix is not None and DENSE_SHORTCUT and T and all_dense(pos, topk, kpool):
        # every row's pass is dense (rows 0 .. p): the query heads and pool scores would
        # choose nothing, so they are not computed (the same choices, the same bytes)
        count = pos + 1
        out_pos = np.broadcast_to(np.arange(int(count.max()), dtype=np.int64),
                                  (T, int(count.max()))).copy()
        choices = [out_pos[t, :count[t]] for t in range(T)]
    elif ix is not None:
        iq, iw = index_query(q_resid, ix.wq_t, x, ix.wproj_t, n_heads)
        lmax = min(int(pos.max()) + 1, topk + kpool - 1) if T else 0
        out_pos = np.empty((T, max(lmax, 1)), np.int64)
        count = np.empty(T, np.int64)
        _choose(pos, owner, tables, page_rows, np.ascontiguousarray(iq, dtype=F32),
                np.ascontiguousarray(iw, dtype=F32), dsa.pooled_view(pooled, kpool), int(topk),
                int(kpool), out_pos, count)
        choices = [out_pos[t, :count[t]] for t in range(T)]
    else:
        if len(choices_in) != T:
            raise ValueError(f"dsa: a shared layer got {len(choices_in)} choices for {T} rows")
        count = np.asarray([len(c) for c in choices_in], np.int64)
        out_pos = np.zeros((T, max(int(count.max()) if T else 1, 1)), np.int64)
        for t, c in enumerate(choices_in):
            out_pos[t, :len(c)] = c
        choices = list(choices_in)
    threads = numba.get_num_threads()
    n_hb, HB = cut_to or cut(T, H, threads)
    n_jobs = -(-T // ROW_BLOCK) * n_hb
    if parallel is None:
        parallel = threads > 1 and n_jobs > 1
    out = np.empty((T, H * V), F32)
    (_attend_par if parallel else _attend_ser)(
        n_jobs, n_hb, HB, np.ascontiguousarray(q[:, :, :N], dtype=F32),
        np.ascontiguousarray(w_uk, dtype=F32), np.ascontiguousarray(w_uv_t, dtype=F32), pool,
        out_pos, count, owner, tables, page_rows, F32(scale), out)
    return out, choices
