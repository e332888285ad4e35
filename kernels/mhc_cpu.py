"""mHC's residual streams on the CPU in numba: what glm5next runs where numba loads
(kernels.ops.mhc_pre / mhc_post / mhc_head). The numpy definition is kernels/mhc.py; this is
the same arithmetic a token at a time, in its own fixed order.

**Which bytes.** Not the definition's: the definition's mean of squares is numpy's pairwise
reduction and its projection goes through OpenBLAS (kernels/matmul.ref), whose orders no
numba code copies. Where numba loads, the family's bytes are this kernel's; its numbers are
held to the definition within float32 rounding (tests/model/test_mhc_cpu.py) and the family to
its recorded references under the golden rule (tests/model/test_glm53.py), with paged ==
window, solo == concurrent and TP 2 / 3 == TP 1 on these bytes.

For each token t, alone (its numbers never depend on another token, the batch or the round):

    ss       = dot16(flat, flat)            flat: the N streams as one row of N D; 16 lanes
                                            (lane l: k = l, l + 16, ...), then the fixed tree
    r        = 1 / sqrt(ss / (N D) + eps)   float32 steps
    flat_n   = flat * r
    mixes[j] = dot16(flat_n, fn[j])         j = 0 .. (2 + N) N - 1 (fn: [(2 + N) N, N D])
    pre, post, comb, the Sinkhorn iterations:  kernels/mhc.weights' formulas on the 24 values,
                                            every sum over streams in stream order
    x[d]     = ((pre0 s0[d] + pre1 s1[d]) + pre2 s2[d]) + pre3 s3[d]
    out[j,d] = (((post[j] y[d] + c0j s0[d]) + c1j s1[d]) + c2j s2[d]) + c3j s3[d]

(dot16: kernels/vec_ir.py's chain; products and sums float32 with no contraction to fma
outside it.) Tokens run in parallel (from PARALLEL_ROWS tokens a call), each on one thread: the cut
changes no byte.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numpy as np
from numba import njit, prange

from kernels.vec_ir import dot_rows16

F32 = np.float32
PARALLEL_ROWS = 4         # tokens from which a call runs in a parallel region (fewer: the caller's thread)


@njit(cache=True, boundscheck=False, nogil=True)
def _weights_one(flat, fn, base, scale, D, norm_eps, hc_eps, iters, scratch, mixes, pre, post,
                 comb):
    """One token's pre [N], post [N], comb [N, N] from its streams flat [N D] (scratch [N D]:
    the normed row)."""
    N = pre.shape[0]
    ND = flat.shape[0]
    ss = np.zeros(1, np.float32)
    dot_rows16(flat, flat.reshape(1, ND), ss)
    r = np.float32(1.0) / np.sqrt(ss[0] / np.float32(ND) + np.float32(norm_eps))
    for k in range(ND):
        scratch[k] = flat[k] * r
    dot_rows16(scratch, fn, mixes)
    eps = np.float32(hc_eps)
    one = np.float32(1.0)
    for i in range(N):
        pre[i] = one / (one + np.exp(-(mixes[i] * scale[0] + base[i]))) + eps
        post[i] = np.float32(2.0) * (one / (one + np.exp(-(mixes[N + i] * scale[1] + base[N + i]))))
    for i in range(N):
        mx = np.float32(-np.inf)
        for j in range(N):
            v = mixes[2 * N + i * N + j] * scale[2] + base[2 * N + i * N + j]
            comb[i, j] = v
            if v > mx:
                mx = v
        s = np.float32(0.0)
        for j in range(N):
            e = np.exp(comb[i, j] - mx)
            comb[i, j] = e
            s = e if j == 0 else s + e
        for j in range(N):
            comb[i, j] = comb[i, j] / s + eps
    for it in range(iters):
        if it > 0:                             # rows, then columns
            for i in range(N):
                s = comb[i, 0]
                for j in range(1, N):
                    s = s + comb[i, j]
                s = s + eps
                for j in range(N):
                    comb[i, j] = comb[i, j] / s
        for j in range(N):                     # columns
            s = comb[0, j]
            for i in range(1, N):
                s = s + comb[i, j]
            s = s + eps
            for i in range(N):
                comb[i, j] = comb[i, j] / s


@njit(cache=True, boundscheck=False, nogil=True)
def _pre_token(t, streams, fn, base, scale, norm_eps, hc_eps, iters, x, post, comb):
    T, N, D = streams.shape
    flat = streams[t].reshape(N * D)
    scratch = np.empty(N * D, np.float32)
    mixes = np.empty(fn.shape[0], np.float32)
    pre = np.empty(N, np.float32)
    _weights_one(flat, fn, base, scale, D, norm_eps, hc_eps, iters, scratch, mixes, pre,
                 post[t], comb[t])
    for d in range(D):
        acc = pre[0] * streams[t, 0, d]
        for i in range(1, N):
            acc = acc + pre[i] * streams[t, i, d]
        x[t, d] = acc


@njit(cache=True, boundscheck=False, nogil=True, parallel=True)
def _pre_par(streams, fn, base, scale, norm_eps, hc_eps, iters, x, post, comb):
    for t in prange(streams.shape[0]):
        _pre_token(np.int64(t), streams, fn, base, scale, norm_eps, hc_eps, iters, x, post, comb)


@njit(cache=True, boundscheck=False, nogil=True)
def _pre_ser(streams, fn, base, scale, norm_eps, hc_eps, iters, x, post, comb):
    for t in range(streams.shape[0]):
        _pre_token(t, streams, fn, base, scale, norm_eps, hc_eps, iters, x, post, comb)


@njit(cache=True, boundscheck=False, nogil=True)
def _post_token(t, y, streams, post, comb, out):
    T, N, D = streams.shape
    for j in range(N):
        pj = post[t, j]
        for d in range(D):
            acc = pj * y[t, d]
            for i in range(N):
                acc = acc + comb[t, i, j] * streams[t, i, d]
            out[t, j, d] = acc


@njit(cache=True, boundscheck=False, nogil=True, parallel=True)
def _post_par(y, streams, post, comb, out):
    for t in prange(streams.shape[0]):
        _post_token(np.int64(t), y, streams, post, comb, out)


@njit(cache=True, boundscheck=False, nogil=True)
def _post_ser(y, streams, post, comb, out):
    for t in range(streams.shape[0]):
        _post_token(t, y, streams, post, comb, out)


@njit(cache=True, boundscheck=False, nogil=True)
def _head(streams, out):
    T, N, D = streams.shape
    inv = np.float32(1.0 / N)
    for t in range(T):
        for d in range(D):
            acc = streams[t, 0, d]
            for i in range(1, N):
                acc = acc + streams[t, i, d]
            out[t, d] = acc * inv


def fn_rows(fn_t: np.ndarray) -> np.ndarray:
    """fn [(2 + N) N, N D] float32 contiguous from the family's fn_t [N D, (2 + N) N]."""
    return np.ascontiguousarray(np.asarray(fn_t, F32).T)


def pre(streams, fn, base, scale, *, norm_eps, hc_eps, iters):
    """kernels/mhc.weights + collapse's contract, this file's arithmetic: streams [T, N, D]
    float32, fn [(2 + N) N, N D] (fn_rows) -> (x [T, D], post [T, N], comb [T, N, N])."""
    streams = np.ascontiguousarray(streams, dtype=F32)
    T, N, D = streams.shape
    if fn.shape != ((2 + N) * N, N * D) or (N * D) % 16:
        raise ValueError(f"mhc_cpu: fn is {fn.shape}, expected {((2 + N) * N, N * D)} for {N} "
                         f"streams of {D} (N D a multiple of 16)")
    if iters < 1:
        raise ValueError(f"mhc_cpu: hc_sinkhorn_iters = {iters}, at least 1")
    x = np.empty((T, D), F32)
    post = np.empty((T, N), F32)
    comb = np.empty((T, N, N), F32)
    (_pre_par if T >= PARALLEL_ROWS else _pre_ser)(streams, fn, np.ascontiguousarray(base, dtype=F32), np.ascontiguousarray(scale, dtype=F32),
         F32(norm_eps), F32(hc_eps), int(iters), x, post, comb)
    return x, post, comb


def post_mix(y, streams, post, comb):
    """kernels/mhc.post_mix's contract and chain: -> the streams after a block [T, N, D]."""
    streams = np.ascontiguousarray(streams, dtype=F32)
    out = np.empty(streams.shape, F32)
    (_post_par if streams.shape[0] >= PARALLEL_ROWS else _post_ser)(np.ascontiguousarray(y, dtype=F32), streams, np.ascontiguousarray(post, dtype=F32),
          np.ascontiguousarray(comb, dtype=F32), out)
    return out


def head(streams):
    """kernels/mhc.head's chain: the streams' mean [T, D]."""
    streams = np.ascontiguousarray(streams, dtype=F32)
    out = np.empty((streams.shape[0], streams.shape[2]), F32)
    _head(streams, out)
    return out
