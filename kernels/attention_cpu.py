"""A round's RoPE, KV write and causal attention on the CPU in one numba call a layer.

The numpy forms (kernels/rope.py, kv_write.py, attention.py) stay the definition; this is
the same computation without a Python step per chunk, head or query row:
  - RoPE: the round's cos/sin rows come from kernels.rope.cos_sin (the definition's own
    numpy), applied as x1*cos - x2*sin, x2*cos + x1*sin with no fused multiply-add, so the
    rotated q and k are the definition's bytes;
  - every chunk's K and V rows are written through its table first, then every (row, q head)
    attends (prange: both cores): a row at position p reads keys 0..p of its own stream only,
    which no other chunk of the round writes (one chunk a stream), so writing all first is
    the same as the definition's write-then-attend per chunk;
  - scores s_j = (q . k_j) * scale, 16 float32 lanes over the head dim (fused multiply-adds)
    then a fixed tree (kernels.vec_ir.dot16); softmax with its max subtracted, exp (one
    recipe of named operations, kernels.vec_ir.exp_ir, within ~1 ulp), the sum 16 keys wide
    in a fixed order (kernels.vec_ir.softmax16); out = sum_j w_j v_j in key order, a fused
    multiply-add a key
    (kernels.vec_ir.axpy16; head dims not a multiple of 16: the same order in plain loops).
    The scores run 16 keys at a time (dot_rows16: their 16 trees as one) and a kv head's q
    heads' value sums at once (axpy_heads16: each key's value row loaded once for them), each
    element's operations those of the one-at-a-time forms (receipt 2026-12-05-verify-rows).
One (row, head)'s arithmetic depends on its position, its q and its stream's keys only:
never on the other rows of the round, so solo == concurrent and paged == window hold by
construction (tests/model/test_attention_cpu.py, and the engine-level probes).

A job is a group of a chunk's rows (up to ROW_GROUP, `row_groups`) and one kv head: the
group's rows read each key and value page once for all of them (a verify chunk's rows, a
prompt chunk's, all at ~the same keys): at 1,000 keys the default model's K and V rows are
46 MB a row over its 30 layers, as many bytes as its weights, so reading them once a row of
a 9-row verify chunk cost 8 x 46 MB a round more than one row (drafts-2 receipt). Each row
still runs its own calls in its own order (per page: its scores over min(P, L - j) keys,
then its softmax, then its values page by page), so its bytes are those of a job of its own.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env

import numpy as np
from numba import njit, prange

from kernels import rmsnorm_cpu, rope
from kernels.vec_ir import (axpy_heads16, call_f_f_loop, chain_cols16, dot_rows16, prefetch_rows,
                            scale_max16, softmax16, sum_leaf8)


def plan(chunks, spans, pos, inv):
    """The round's description as arrays: cos, sin [T, hd/2], spans [C, 2], starts [C],
    tables [C, max pages] (page ids), page_rows [C]."""
    cos, sin = rope.cos_sin(np.asarray(pos), inv)
    C = len(chunks)
    width = max(len(c.table) for c in chunks)
    tables = np.zeros((C, width), np.int64)
    for i, c in enumerate(chunks):
        tables[i, :len(c.table)] = c.table
    return (cos, sin, np.asarray(spans, np.int64).reshape(C, 2),
            np.asarray([c.start for c in chunks], np.int64), tables,
            np.asarray([c.page_rows for c in chunks], np.int64))


@njit(cache=True, boundscheck=False, nogil=True)
def _rotate(src, cos, sin, dst):
    half = src.shape[0] // 2
    for j in range(half):
        a = src[j]
        b = src[half + j]
        c = cos[j]
        s = sin[j]
        x = a * c
        y = b * s
        dst[j] = x - y
        u = b * c
        w = a * s
        dst[half + j] = u + w


@njit(cache=True, boundscheck=False, nogil=True)
def rope_rows(x, cos, sin, out):
    """out[t, h] = x[t, h] rotated by row t's cos / sin ([T, hd/2]): kernels/rope.ref's
    operations (x1 cos - x2 sin, x2 cos + x1 sin, each product and sum one float32 rounding,
    no fused multiply-add), so its bytes."""
    half = x.shape[2] // 2
    for t in range(x.shape[0]):
        for h in range(x.shape[1]):
            for j in range(half):
                a = x[t, h, j]
                b = x[t, h, half + j]
                c = cos[t, j]
                s = sin[t, j]
                out[t, h, j] = a * c - b * s
                out[t, h, half + j] = b * c + a * s


def apply_rope(x: np.ndarray, positions, inv: np.ndarray) -> np.ndarray:
    """kernels/rope.ref(x, positions, inv) (x [T, H, hd] float32) in one numba call: cos and
    sin from rope.cos_sin (the definition's numpy), the rotation by rope_rows."""
    cos, sin = rope.cos_sin(np.asarray(positions), inv)
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.empty(x.shape, np.float32)
    rope_rows(x, cos, sin, out)
    return out


@njit(cache=True, boundscheck=False, fastmath={"contract"})
def _dot(q, k, acc):
    """dot16's order where the head dim is not a multiple of 16: lane l sums k = l, l + 16, ...
    (a last partial group in lanes 0 .. hd % 16 - 1), then the same tree."""
    for l in range(16):
        acc[l] = 0.0
    n = q.shape[0]
    for d in range(0, n, 16):
        for l in range(min(16, n - d)):
            acc[l] += q[d + l] * k[d + l]
    for l in range(8):
        acc[l] += acc[l + 8]
    for l in range(4):
        acc[l] += acc[l + 4]
    return (acc[0] + acc[2]) + (acc[1] + acc[3])


ROW_GROUP = 8               # a chunk's rows a job takes at most (they share its key reads)


@njit(cache=True, boundscheck=False, nogil=True)
def row_groups(spans):
    """[G, 2] row ranges: each chunk's rows cut into ceil(n / ROW_GROUP) groups of sizes as
    even as can be (in order; a group never crosses chunks): a round's attention jobs are
    its groups x its kv heads."""
    G = 0
    for c in range(spans.shape[0]):
        n = spans[c, 1] - spans[c, 0]
        G += (n + ROW_GROUP - 1) // ROW_GROUP
    out = np.empty((G, 2), np.int64)
    i = 0
    for c in range(spans.shape[0]):
        n = spans[c, 1] - spans[c, 0]
        g = (n + ROW_GROUP - 1) // ROW_GROUP
        t = spans[c, 0]
        for k in range(g):
            m = n // g + (1 if k < n % g else 0)
            out[i, 0] = t
            out[i, 1] = t + m
            t += m
            i += 1
    return out


PARALLEL_FROM = 1 << 12     # keys x q heads in a round from which the attention runs prange,
JOBS_FROM = 4               # when it has this many (row, kv head) jobs (one row's 3 are too
                            # few to share; a decode round of 1 row at 100 keys stays serial)


@njit(cache=True, boundscheck=False)
def wide(spans, starts, nq, nkv):
    """Whether a round's attention runs over both cores (the same (row, head) arithmetic either
    way): its keys x q heads from PARALLEL_FROM and its jobs from JOBS_FROM."""
    keys = 0
    for c in range(spans.shape[0]):
        n = spans[c, 1] - spans[c, 0]
        keys += n * starts[c] + n * (n + 1) // 2
    return keys * nq >= PARALLEL_FROM and row_groups(spans).shape[0] * nkv >= JOBS_FROM


def round_attend(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows,
                 scale, out):
    """qkv [T, (nq + 2 nkv) hd] float32 -> out [T, nq, hd]; K and V rows written to the pools
    ([pages, P, nkv, hd]) through each chunk's table. Both cores where `wide` says (several
    rows and enough keys), else one (one decode row: the fork and join would cost more)."""
    fn = _attend_parallel if wide(spans, starts, nq, nkv) else _attend_serial
    fn(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows, np.float32(scale), out)


@njit(cache=True, boundscheck=False, nogil=True)
def owners(spans, T):
    """owner[t]: the chunk row t belongs to."""
    owner = np.empty(T, np.int64)
    for c in range(spans.shape[0]):
        for t in range(spans[c, 0], spans[c, 1]):
            owner[t] = c
    return owner


@njit(cache=True, boundscheck=False, nogil=True)
def write_row(t, h, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables,
              page_rows):
    """Row t's K (RoPE'd) and V for kv head h, into its chunk's page."""
    c = owner[t]
    P = page_rows[c]
    p = starts[c] + t - spans[c, 0]
    page = tables[c, p // P]
    off = p % P
    _rotate(qkv[t, (nq + h) * hd:(nq + h + 1) * hd], cos[t], sin[t], k_pool[page, off, h])
    vs = qkv[t, (nq + nkv + h) * hd:(nq + nkv + h + 1) * hd]
    vd = v_pool[page, off, h]
    for d in range(hd):
        vd[d] = vs[d]


@njit(cache=True, boundscheck=False)
def _write(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows):
    owner = owners(spans, qkv.shape[0])
    for t in range(qkv.shape[0]):
        for h in range(nkv):
            write_row(t, h, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
                      tables, page_rows)
    return owner


@njit(cache=True, boundscheck=False, nogil=True)
def _job(job, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows,
         scale, out):
    """One (row, kv head) of the round: its group's q heads, each with its own arithmetic,
    read the keys a page at a time, each page once for the whole group (then in L1)."""
    group = nq // nkv
    t = job // nkv
    h = job % nkv
    c = owner[t]
    P = page_rows[c]
    L = starts[c] + t - spans[c, 0] + 1
    q = np.empty((group, hd), np.float32)
    acc = np.empty(16, np.float32)
    for g in range(group):
        hq = h * group + g
        _rotate(qkv[t, hq * hd:(hq + 1) * hd], cos[t], sin[t], q[g])
    Lp = (L + 15) // 16 * 16                 # the scores padded to 16 lanes (-inf: weight 0)
    s = np.empty((group, Lp), np.float32)
    vec = hd % 16 == 0
    j = 0
    pi = 0
    while j < L:                       # every key and value row of the job asked for at once
        n = min(P, L - j)
        prefetch_rows(k_pool[tables[c, pi]][:n, h])
        prefetch_rows(v_pool[tables[c, pi]][:n, h])
        j += n
        pi += 1
    j = 0
    pi = 0
    while j < L:                       # the keys a page at a time: rows j .. j + n - 1
        n = min(P, L - j)
        kp = k_pool[tables[c, pi]]
        for g in range(group):
            if vec:
                dot_rows16(q[g], kp[:n, h], s[g, j:j + n])
            else:
                for r in range(n):
                    s[g, j + r] = _dot(q[g], kp[r, h], acc)
        j += n
        pi += 1
    sc = np.float32(scale)
    for g in range(group):
        sg = s[g]
        for j in range(L, Lp):
            sg[j] = -np.inf
        softmax16(sg, sc)
        o = out[t, h * group + g]
        for d in range(hd):
            o[d] = 0.0
    j = 0
    pi = 0
    while j < L:
        n = min(P, L - j)
        vp = v_pool[tables[c, pi]]
        if vec:                        # the group's q heads at once, each its own chains
            axpy_heads16(out[t, h * group:(h + 1) * group], s[:, j:j + n], vp[:n, h])
            j += n
            pi += 1
            continue
        for g in range(group):
            o = out[t, h * group + g]
            for r in range(n):
                vj = vp[r, h]
                for d in range(hd):
                    o[d] = o[d] + s[g, j + r] * vj[d]
        j += n
        pi += 1


@njit(cache=True, boundscheck=False, nogil=True)
def _group_job(job, groups, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
               tables, page_rows, scale, out):
    """One (row group, kv head) of the round (`row_groups`): `span_job` on the group's rows."""
    gi = job // nkv
    span_job(groups[gi, 0], groups[gi, 1], job % nkv, owner, qkv, nq, nkv, hd, cos, sin, k_pool,
             v_pool, spans, starts, tables, page_rows, scale, out)


@njit(cache=True, boundscheck=False, nogil=True)
def span_job(t0, t1, h, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
             tables, page_rows, scale, out):
    """Rows t0 .. t1 - 1 (one chunk's, any run of them) and kv head h: each row runs `_job`'s
    arithmetic for that head, every key and value page read once for the rows."""
    group = nq // nkv
    R = t1 - t0
    if R == 1:
        _job(t0 * nkv + h, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
             tables, page_rows, scale, out)
        return
    c = owner[t0]
    P = page_rows[c]
    L0 = starts[c] + t0 - spans[c, 0] + 1           # row r of the group reads L0 + r keys
    Lmax = L0 + R - 1
    Lp = (Lmax + 15) // 16 * 16
    q = np.empty((R, group, hd), np.float32)
    acc = np.empty(16, np.float32)
    for r in range(R):
        for g in range(group):
            hq = h * group + g
            _rotate(qkv[t0 + r, hq * hd:(hq + 1) * hd], cos[t0 + r], sin[t0 + r], q[r, g])
    s = np.empty((R, group, Lp), np.float32)
    vec = hd % 16 == 0
    j = 0
    pi = 0
    while j < Lmax:
        n = min(P, Lmax - j)
        prefetch_rows(k_pool[tables[c, pi]][:n, h])
        prefetch_rows(v_pool[tables[c, pi]][:n, h])
        j += n
        pi += 1
    j = 0
    pi = 0
    while j < Lmax:                    # the keys a page at a time, for every row that reads it
        kp = k_pool[tables[c, pi]]
        for r in range(R):
            n = min(P, L0 + r - j)
            if n <= 0:
                continue
            for g in range(group):
                if vec:
                    dot_rows16(q[r, g], kp[:n, h], s[r, g, j:j + n])
                else:
                    for k in range(n):
                        s[r, g, j + k] = _dot(q[r, g], kp[k, h], acc)
        j += P
        pi += 1
    sc = np.float32(scale)
    for r in range(R):
        L = L0 + r
        Lr = (L + 15) // 16 * 16
        for g in range(group):
            sg = s[r, g, :Lr]
            for k in range(L, Lr):
                sg[k] = -np.inf
            softmax16(sg, sc)
            o = out[t0 + r, h * group + g]
            for d in range(hd):
                o[d] = 0.0
    j = 0
    pi = 0
    while j < Lmax:
        vp = v_pool[tables[c, pi]]
        for r in range(R):
            n = min(P, L0 + r - j)
            if n <= 0:
                continue
            if vec:                    # the group's q heads at once, each its own chains
                axpy_heads16(out[t0 + r, h * group:(h + 1) * group], s[r, :, j:j + n], vp[:n, h])
                continue
            for g in range(group):
                o = out[t0 + r, h * group + g]
                for k in range(n):
                    vj = vp[k, h]
                    for d in range(hd):
                        o[d] = o[d] + s[r, g, j + k] * vj[d]
        j += P
        pi += 1


@njit(cache=True, boundscheck=False)
def _attend_serial(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows,
                   scale, out):
    owner = _write(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows)
    groups = row_groups(spans)
    for job in range(groups.shape[0] * nkv):
        _group_job(job, groups, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
                   tables, page_rows, scale, out)


@njit(cache=True, parallel=True, boundscheck=False)
def _attend_parallel(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows,
                     scale, out):
    owner = _write(qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts, tables, page_rows)
    groups = row_groups(spans)
    for job in prange(groups.shape[0] * nkv):
        _group_job(np.int64(job), groups, owner, qkv, nq, nkv, hd, cos, sin, k_pool, v_pool, spans, starts,
                   tables, page_rows, scale, out)


# A chunk's rows with kernels/attention.ref's own float operations (the numpy backend's
# attention, on which the Qwen3 / GLM families' bytes rest), without a Python step a row:
#   scores  np.matmul(q_g, K) is OpenBLAS's sgemm on C^T = K^T q^T (M = keys, N = G, K = hd),
#           below REF_MNK = M N K its small-matrix kernel (sgemm_small_kernel_b0, x86-64
#           AVX-512): the keys in whole 16s, and a last 9..15, each a fused multiply-add chain
#           over d from 0 (`vec_ir.chain_cols16`); a last 1..8 keys (K >= 32) each 16 chains,
#           lane l over d = l mod 16, summed as ((l0+l1)+(l2+l3)) + ... in the pairs' order
#           (`_lane_score`); then times scale (one float32 rounding);
#   softmax s - max, numpy's exp (its own float32 inner loop, called on a job's scores in
#           place: np_exp_loop; its bytes for an element do not depend on where the element
#           lies), the sum in numpy's pairwise order (`_np_sum`), then w / sum;
#   values  np.matmul(w, V): C^T = V^T w^T (M = hd, N = G, K = keys): one fused multiply-add
#           chain over the keys in order from 0 for every (g, d) (vec_ir.axpy_heads16's).
# A job is 8 rows and one kv head, whole (scores, exp, sums, values: its scores stay in L2).
# `ref_rows` holds the shapes to that kernel's bounds; `ref_agrees` checks this process's
# numpy against the whole form once (the kernels a numpy build's BLAS picks are its own): the
# caller falls back to attention.ref wherever either says no.
REF_MNK = 1_000_000
REF_KEYS = 2048             # and at most this many keys (bounds ref_agrees' check)


@njit(cache=True, boundscheck=False, nogil=True)
def ref_rows(start, n, G, hd):
    """The rows 0..r - 1 of a chunk (at positions start..) whose keys fit the small kernel:
    G hd L <= REF_MNK and L <= REF_KEYS for L = start + i + 1 (hd >= 32, a multiple of 16)."""
    if hd < 32 or hd % 16 != 0:
        return 0
    r = 0
    while r < n and G * hd * (start + r + 1) <= REF_MNK and start + r + 1 <= REF_KEYS:
        r += 1
    return r


@njit(cache=True, boundscheck=False, nogil=True, fastmath={"contract"})
def _lane_score(q, k, acc):
    """sum_d q[d] k[d] as 16 fma chains (lane l: d = l, l + 16, ...), then
    ((l0+l1)+(l2+l3)) ... summed pairwise up: REDUCE_M4's order."""
    for l in range(16):
        acc[l] = 0.0
    for d0 in range(0, q.shape[0], 16):
        for l in range(16):
            acc[l] += q[d0 + l] * k[d0 + l]
    for l in range(8):
        acc[l] = acc[2 * l] + acc[2 * l + 1]
    for l in range(4):
        acc[l] = acc[2 * l] + acc[2 * l + 1]
    return (acc[0] + acc[1]) + (acc[2] + acc[3])


@njit(cache=True, boundscheck=False, nogil=True)
def _sum_leaf(a, o, n):
    """numpy's pairwise leaf (n <= 128) of a[o:o+n]: fewer than 8 in turn from -0.0; else 8
    running sums over the first n - n % 8, ((0+1)+(2+3))+((4+5)+(6+7)), the tail in turn
    (vec_ir.sum_leaf8: the 8 sums as one vector's lanes)."""
    if n < 8:
        res = np.float32(-0.0)
        for i in range(o, o + n):
            res += a[i]
        return res
    return sum_leaf8(a, o, n)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum1(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum_leaf(a, o, h) + _sum_leaf(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum2(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum1(a, o, h) + _sum1(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum3(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum2(a, o, h) + _sum2(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum4(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum3(a, o, h) + _sum3(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum5(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum4(a, o, h) + _sum4(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum6(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum5(a, o, h) + _sum5(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum7(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum6(a, o, h) + _sum6(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _sum8(a, o, n):
    if n <= 128:
        return _sum_leaf(a, o, n)
    h = n // 2
    h -= h % 8
    return _sum7(a, o, h) + _sum7(a, o + h, n - h)


@njit(cache=True, boundscheck=False, nogil=True)
def _np_sum(a, n):
    """numpy's pairwise sum of a[:n] (float32 add.reduce over a contiguous run): spans over 128
    halved (the left half rounded down to a multiple of 8), leaves by _sum_leaf; written as
    eight levels, not recursion (numba's cache mishandles a recursive function): n up to
    2 ** 14 (ref_rows keeps L <= REF_KEYS); added to numpy's identity 0 last (a sum of -0.0s
    is +0.0, as numpy's)."""
    return np.float32(0.0) + _sum8(a, 0, n)


@njit(cache=True, boundscheck=False, nogil=True)
def ref_gather_span(k_pool, v_pool, table, P, last, Kb, V, a, b):
    """A stream's key rows a..b through its table: K row j into Kb[h, j // REF_KB, :, j %
    REF_KB] (a block of REF_KB keys' columns, [hd, REF_KB], one run of memory), V row j into
    V[h, j]; where b == last also Kb's columns from last on set to zero. Each row's places
    its own, so two spans on two threads write what one call does."""
    for j in range(a, b):
        page = table[j // P]
        off = j % P
        jb = j // REF_KB
        jc = j % REF_KB
        for h in range(Kb.shape[0]):
            for d in range(Kb.shape[2]):
                Kb[h, jb, d, jc] = k_pool[page, off, h, d]
                V[h, j, d] = v_pool[page, off, h, d]
    if b != last:
        return
    for h in range(Kb.shape[0]):
        for j in range(last, Kb.shape[1] * REF_KB):
            for d in range(Kb.shape[2]):
                Kb[h, j // REF_KB, d, j % REF_KB] = 0.0


REF_GROUP = 8               # a job's rows (they share each key block's reads, in L1)
REF_KB = 32                 # the keys of a score block (16 KB of K at hd 128, in L1)
REF_VKEYS = 32              # the value rows a block (16 KB at hd 128)


@njit(cache=True, boundscheck=False, nogil=True)
def _row_scores(S, offs, r, G, L):
    """The job's row r's scores in S: [G, Lp] at offs[r], Lp its L keys rounded up to 16."""
    Lp = (L + 15) // 16 * 16
    return S[offs[r]:offs[r] + G * Lp].reshape(G, Lp)


@njit(cache=True, boundscheck=False, nogil=True)
def _job_scores(t0, t1, qj, Kb, start, scale, S, offs):
    """Rows t0 .. t1 - 1 of the chunk, one kv head (qj [rows, G, hd]: their q heads of it; Kb
    [blocks, hd, REF_KB]: its keys), into S (row i's [G, Lp_i] at offs[i - t0], Lp_i its L_i
    keys rounded up to 16): each score a chain over d (a key block read once for the rows),
    the last 1..8 keys' lane sums, times scale, less their max, the padding -inf."""
    G = qj.shape[1]
    hd = qj.shape[2]
    Lmax = start + t1
    for j0 in range(0, Lmax, REF_KB):
        kb = Kb[j0 // REF_KB]
        for i in range(t0, t1):
            L = start + i + 1
            if L > j0:
                s = _row_scores(S, offs, i - t0, G, L)
                j1 = min(j0 + REF_KB, s.shape[1])
                chain_cols16(qj[i - t0], kb[:, :j1 - j0], s[:, j0:j1])
    acc = np.empty(16, np.float32)
    kc = np.empty(hd, np.float32)
    for i in range(t0, t1):
        L = start + i + 1
        s = _row_scores(S, offs, i - t0, G, L)
        qg = qj[i - t0]
        mm = L % 16
        if 1 <= mm <= 8:
            for j in range(L - mm, L):
                for d in range(hd):
                    kc[d] = Kb[j // REF_KB, d, j % REF_KB]
                for g in range(G):
                    s[g, j] = _lane_score(qg[g], kc, acc)
        L16 = L // 16 * 16
        for g in range(G):           # the max in 16 lanes (vec_ir.scale_max16)
            sg = s[g]
            m = scale_max16(sg, scale, L16)
            for j in range(L16, L):
                v = sg[j] * scale
                sg[j] = v
                m = max(m, v)
            for j in range(L):
                sg[j] = sg[j] - m
            for j in range(L, s.shape[1]):
                sg[j] = -np.inf


@njit(cache=True, boundscheck=False, nogil=True)
def _job_values(t0, t1, Vh, start, S, offs, oj):
    """Rows t0 .. t1 - 1, one kv head (Vh [keys, hd]: its values), on S's exp'd scores: w =
    e / their sum (numpy's pairwise order), oj [rows, G, hd] = w V, each (row, head, d) one
    fma chain over the keys in order (axpy_heads16's; a block of REF_VKEYS value rows read
    once for the rows)."""
    G = oj.shape[1]
    for i in range(t0, t1):
        L = start + i + 1
        s = _row_scores(S, offs, i - t0, G, L)
        for g in range(G):
            t = _np_sum(s[g], L)
            for j in range(L):
                s[g, j] = s[g, j] / t
            o = oj[i - t0, g]
            for d in range(o.shape[0]):
                o[d] = 0.0
    Lmax = start + t1
    for j0 in range(0, Lmax, REF_VKEYS):
        for i in range(t0, t1):
            L = start + i + 1
            if L > j0:
                j1 = min(L, j0 + REF_VKEYS)
                s = _row_scores(S, offs, i - t0, G, L)
                axpy_heads16(oj[i - t0], s[:, j0:j1], Vh[j0:j1])


@njit(cache=True, boundscheck=False, nogil=True)
def _chunk_job(job, q, Kb, V, start, scale, ex, S, out):
    """Rows 8g .. 8g + 7 of the chunk, kv head h (job = g KV + h), whole: their scores, numpy's
    exp (its float32 loop at `ex`, in place on the job's scores: np.exp's values, which do not
    depend on where an element lies), their sums and values. The job's scores lie in S (this
    thread's, [rows, G, Lp_i] one after another: in L2 from scores to values), its q and out
    rows in arrays of its own (in the chunk they lie nq hd apart: the same L1 sets)."""
    KV = Kb.shape[0]
    n, nq, hd = q.shape
    G = nq // KV
    t0 = (job // KV) * REF_GROUP
    t1 = min(n, t0 + REF_GROUP)
    R = t1 - t0
    h = job % KV
    offs = np.empty(REF_GROUP + 1, np.int64)
    offs[0] = 0
    for i in range(t0, t1):
        offs[i - t0 + 1] = offs[i - t0] + G * ((start + i + 16) // 16 * 16)
    qj = np.empty((R, G, hd), np.float32)
    for r in range(R):
        for g in range(G):
            for d in range(hd):
                qj[r, g, d] = q[t0 + r, h * G + g, d]
    oj = np.empty((R, G, hd), np.float32)
    _job_scores(t0, t1, qj, Kb[h], start, scale, S, offs)
    call_f_f_loop(ex, S, offs[R])
    _job_values(t0, t1, V[h], start, S, offs, oj)
    for r in range(R):
        for g in range(G):
            for d in range(hd):
                out[t0 + r, h * G + g, d] = oj[r, g, d]


@njit(cache=True, boundscheck=False, nogil=True)
def _jobs(n, KV):
    return (n + REF_GROUP - 1) // REF_GROUP * KV


@njit(cache=True, boundscheck=False, parallel=True)
def ref_attend(q, Kb, V, start, scale, ex, out, W):
    """Every job of the chunk (`_chunk_job`): job w, w + W, ... on thread w (each thread early
    and late rows; at an even kv head count and W = 2 the two threads' keys are the same)."""
    KV = Kb.shape[0]
    n, nq, hd = q.shape
    G = nq // KV
    J = _jobs(n, KV)
    Lp = (start + n + 15) // 16 * 16
    for w in prange(W):
        S = np.empty(REF_GROUP * G * Lp, np.float32)
        for job in range(w, J, W):
            _chunk_job(np.int64(job), q, Kb, V, start, scale, ex, S, out)


_EXP: list = []


def np_exp_loop() -> int:
    """The address of numpy's float32 exp inner loop (np.exp's first 'f->f' loop: the one a
    float32 array runs), read from the ufunc object (numpy's PyUFuncObject: nin, nout, nargs
    at 16, functions at 32, data at 40, ntypes at 48, types at 64 on a 64-bit build), held to
    np.exp on probe values (2**20 random bit patterns: every class of float32; negatives to
    the underflow and past it, the overflow, zeros, infinities, NaN, subnormals) at three
    offsets before it is used; 0 where any of that does not hold (then ref_agrees says no and
    the engine runs attention.ref)."""
    if not _EXP:
        _EXP.append(_find_exp_loop())
    return _EXP[0]


def _find_exp_loop() -> int:
    import ctypes
    import sys
    u = np.exp
    try:
        if sys.maxsize < 2 ** 32 or type(u) is not np.ufunc or "f->f" not in u.types:
            return 0
        base = id(u)
        nin, nout, nargs = (ctypes.c_int * 3).from_address(base + 16)
        ntypes = ctypes.c_int.from_address(base + 48).value
        if (nin, nout, nargs, ntypes) != (1, 1, 2, u.ntypes):
            return 0
        fp = ctypes.c_void_p.from_address(base + 32).value
        dp = ctypes.c_void_p.from_address(base + 40).value
        tp = ctypes.c_void_p.from_address(base + 64).value
        if not fp or not tp:
            return 0
        i = u.types.index("f->f")
        if ctypes.string_at(tp + 2 * i, 2) != bytes([np.dtype(np.float32).num] * 2):
            return 0
        if dp and ctypes.c_void_p.from_address(dp + 8 * i).value:
            return 0                    # a loop that wants its data pointer: not this form
        addr = ctypes.c_void_p.from_address(fp + 8 * i).value or 0
    except (ValueError, OSError):
        return 0
    return addr if addr and _exp_probe(addr) else 0


def _exp_probe(addr: int) -> bool:
    rng = np.random.default_rng(3)
    bits = rng.integers(0, 2 ** 32, 1 << 20, dtype=np.uint64).astype(np.uint32)
    x = np.concatenate([
        bits.view(np.float32),
        -np.abs(rng.standard_normal(1 << 16).astype(np.float32)) * np.float32(30),
        np.linspace(-110, 95, 1 << 16, dtype=np.float32),
        np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 1e-38, -1e-38,
                  88.72283, 88.72284, -87.33654, -103.97208, -103.9721, -150.0], np.float32)])
    for o in (0, 1, 7):                 # the loop's head and tail at other offsets too
        with np.errstate(all="ignore"):
            want = np.exp(x[o:])
        got = x[o:].copy()
        _exp_inplace(addr, got, got.shape[0])
        if want.tobytes() != got.tobytes():
            return False
    return True


@njit(cache=True, boundscheck=False, nogil=True)
def _exp_inplace(addr, x, n):
    call_f_f_loop(addr, x, n)


def _serial(fn, cut, n):
    fn(0, cut)
    fn(cut, n)


def ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, pair=_serial):
    """out = kernels/attention.ref(q, k_pool, v_pool, table, P, start, scale) for a chunk whose
    rows all fit (ref_rows(start, n, G, hd) == n; q [n, nq, hd] float32, contiguous; its K and
    V rows already written) where np_exp_loop() found numpy's exp loop: the stream's keys
    gathered once (Kb, V: two spans of key rows by `pair`; the bytes are the same whatever
    `pair` does), then every (8 rows, kv head) job whole over both cores (ref_attend)."""
    n, nq, hd = q.shape
    KV = k_pool.shape[2]
    last = start + n
    ex = np_exp_loop()
    if not ex:
        raise RuntimeError("ref_chunk: numpy's float32 exp loop was not found (ref_agrees says no)")
    Kb = np.empty((KV, (last + REF_KB - 1) // REF_KB, hd, REF_KB), np.float32)
    V = np.empty((KV, last, hd), np.float32)
    pair(lambda a, b: ref_gather_span(k_pool, v_pool, table, P, last, Kb, V, a, b),
         last // 32 * 16, last)                      # the keys' rows in two spans
    import numba
    ref_attend(q, Kb, V, start, np.float32(scale), ex, out, max(1, numba.get_num_threads()))


_AGREES: dict = {}


def ref_agrees(G: int, hd: int) -> bool:
    """Whether ref_chunk gives attention.ref's bytes in this process for G q heads a kv head
    and head dim hd: numpy's exp loop found (np_exp_loop), and both run once on random rows at
    key counts 1..48 (every remainder of the last 16 keys: the orders change with it) and the
    last 32 that ref_rows admits for the shape (the bound), compared bit for bit; remembered."""
    key = (G, hd)
    if key not in _AGREES:
        from kernels import attention
        top = int(ref_rows(0, 1 << 20, G, hd))
        ok = top > 0 and np_exp_loop() != 0
        rng = np.random.default_rng(31)
        KV, P = 2, 16
        pages = (top + P - 1) // P
        for start, n in ((0, min(48, top)), (max(0, top - 32), min(32, top))):
            if not ok:
                break
            k_pool = rng.standard_normal((pages + 1, P, KV, hd)).astype(np.float32)
            v_pool = rng.standard_normal((pages + 1, P, KV, hd)).astype(np.float32)
            table = rng.permutation(pages + 1)[:pages].astype(np.int64)
            q = (rng.standard_normal((n, KV * G, hd)) * 0.3).astype(np.float32)
            want = attention.ref(q, k_pool, v_pool, table, P, start, 0.0883883)
            got = np.empty(want.shape, np.float32)
            ref_chunk(q, k_pool, v_pool, table, P, start, 0.0883883, got)
            ok = bool(np.array_equal(want.view(np.int32), got.view(np.int32)))
        _AGREES[key] = ok
    return _AGREES[key]


def ref_warm():
    """Load ref_chunk's numba functions (from numba's cache: ~0.1 s in a fresh process) on a
    one-row chunk, so the first long prompt does not pay for it; finds numpy's exp loop."""
    if not np_exp_loop():
        return
    kp = np.zeros((1, 16, 1, 32), np.float32)
    out = np.empty((1, 1, 32), np.float32)
    ref_chunk(np.zeros((1, 1, 32), np.float32), kp, kp, np.zeros(1, np.int64), 16, 0, 1.0, out)


@njit(cache=True, boundscheck=False, nogil=True)
def prep_rows(qkv, nq, nkv, hd, r, cos, sin, qw, kw, norm, eps, q, k, v, a, b):
    """Rows a..b of a round's fused qkv [T, (nq + 2 nkv) hd] -> q [T, nq, hd], k, v [T, nkv,
    hd]: q and k heads normed (norm: rmsnorm_cpu.np_rms_norm's row, rmsnorm.ref's bytes, with
    weights qw / kw), then their first r dims rotated by row t's cos / sin (rope_rows'
    operations: rope.ref's bytes), the rest as they are; v copied. What Ops.qkv_attend does
    before the attention, a row at a time."""
    st = rmsnorm_cpu._stack()
    tmp = np.empty(hd, np.float32)
    half = r // 2
    for t in range(a, b):
        for hh in range(nq + nkv):
            src = qkv[t, hh * hd:(hh + 1) * hd]
            dst = q[t, hh] if hh < nq else k[t, hh - nq]
            if norm:
                rmsnorm_cpu._np_norm_row(src, qw if hh < nq else kw, eps, tmp, st)
            else:
                for d in range(hd):
                    tmp[d] = src[d]
            for j in range(half):
                x1 = tmp[j]
                x2 = tmp[half + j]
                c = cos[t, j]
                s = sin[t, j]
                dst[j] = x1 * c - x2 * s
                dst[half + j] = x2 * c + x1 * s
            for d in range(r, hd):
                dst[d] = tmp[d]
        for hh in range(nkv):
            src = qkv[t, (nq + nkv + hh) * hd:(nq + nkv + hh + 1) * hd]
            dv = v[t, hh]
            for d in range(hd):
                dv[d] = src[d]
