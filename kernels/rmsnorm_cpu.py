"""RMSNorm and residual add + RMSNorm on the CPU in one numba call (the numpy form,
kernels/rmsnorm.py, stays the definition).

Per row: h = x + residual (float32), the mean of h*h summed in 16 float32 lanes over the row
then a fixed tree, divided by D; y = (h * (1 / sqrt(mean + eps))) * w. A row's bytes depend on
that row alone. SwiGLU: silu(g) u = g / (1 + exp(-g)) * u, exp by kernels.vec_ir's recipe
(kernels.vec_ir.swiglu16: 16 lanes at a time, the same operations in every lane). Serial: a
parallel region costs more than a decode round's rows (a 1-row norm: 7 us serial, 0.1-0.7 ms
through the OpenMP fork and join on this shared 2-core machine).
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import numpy as np
from numba import njit, prange

from kernels.vec_ir import swiglu16


@njit(cache=True, boundscheck=False, nogil=True)
def _norm_row(h, w, eps, y):
    D = h.shape[0]
    acc = np.zeros(16, np.float32)
    k = 0
    while k + 16 <= D:
        for l in range(16):
            acc[l] += h[k + l] * h[k + l]
        k += 16
    while k < D:
        acc[0] += h[k] * h[k]
        k += 1
    for l in range(8):
        acc[l] += acc[l + 8]
    for l in range(4):
        acc[l] += acc[l + 4]
    ss = (acc[0] + acc[2]) + (acc[1] + acc[3])
    r = np.float32(1.0) / np.sqrt(ss / np.float32(D) + np.float32(eps))
    for k in range(D):
        y[k] = (h[k] * r) * w[k]


@njit(cache=True, boundscheck=False, nogil=True)
def rms_norm(x, w, eps, y):
    for i in range(x.shape[0]):
        _norm_row(x[i], w, eps, y[i])


@njit(cache=True, boundscheck=False, nogil=True)
def add_rms_norm(x, residual, w, eps, y, h):
    D = x.shape[1]
    for i in range(x.shape[0]):
        for k in range(D):
            h[i, k] = x[i, k] + residual[i, k]
        _norm_row(h[i], w, eps, y[i])


# ---- numpy's own order (the "numpy" ops backend's norms, kernels/rmsnorm.ref, byte for byte)
@njit(cache=True, boundscheck=False, nogil=True)
def _leaf_sq(x, a, n):
    """numpy's pairwise leaf (n <= 128) of x[a:a+n] ** 2: fewer than 8 values in turn; else
    8 running sums over the first n - n % 8, combined ((0+1)+(2+3))+((4+5)+(6+7)), the tail
    added in turn."""
    if n < 8:
        res = np.float32(0.0)
        for i in range(a, a + n):
            res += x[i] * x[i]
        return res
    r0 = x[a] * x[a]
    r1 = x[a + 1] * x[a + 1]
    r2 = x[a + 2] * x[a + 2]
    r3 = x[a + 3] * x[a + 3]
    r4 = x[a + 4] * x[a + 4]
    r5 = x[a + 5] * x[a + 5]
    r6 = x[a + 6] * x[a + 6]
    r7 = x[a + 7] * x[a + 7]
    m = n - n % 8
    i = 8
    while i < m:
        b = a + i
        r0 += x[b] * x[b]
        r1 += x[b + 1] * x[b + 1]
        r2 += x[b + 2] * x[b + 2]
        r3 += x[b + 3] * x[b + 3]
        r4 += x[b + 4] * x[b + 4]
        r5 += x[b + 5] * x[b + 5]
        r6 += x[b + 6] * x[b + 6]
        r7 += x[b + 7] * x[b + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += x[a + i] * x[a + i]
        i += 1
    return res


@njit(cache=True, boundscheck=False, nogil=True)
def _psum_sq(x, n, fa, fn, fv, fs):
    """sum(x[:n] ** 2) in float32 in numpy's pairwise order (numpy's reduce of a contiguous
    float32 row, loops_utils.h's pairwise sum): a span of at most 128 is a leaf (_leaf_sq),
    a longer one split at half rounded down to a multiple of 8, its halves' sums added. The
    squares are float32 products, as numpy's x * x; numpy adds the sum to its identity 0, the
    same for a sum of squares. The recursion walked with an explicit stack (fa, fn, fv, fs:
    scratch of 64; numba's cache mishandles a recursive function)."""
    top = 0
    fa[0], fn[0], fs[0] = 0, n, 0
    while True:
        a, m = fa[top], fn[top]
        if m > 128:                                    # descend into the left half
            h = m // 2
            h -= h % 8
            fs[top] = 0
            top += 1
            fa[top], fn[top], fs[top] = a, h, 0
            continue
        ret = _leaf_sq(x, a, m)
        while True:                                    # up, adding finished right halves
            if top == 0:
                return ret
            top -= 1
            if fs[top] == 0:                           # a left half: keep it, go right
                fv[top], fs[top] = ret, 1
                h = fn[top] // 2
                h -= h % 8
                top += 1
                fa[top], fn[top], fs[top] = fa[top - 1] + h, fn[top - 1] - h, 0
                break
            ret = fv[top] + ret                        # a right half: left + right


@njit(cache=True, boundscheck=False, nogil=True)
def _stack():
    return (np.empty(64, np.int64), np.empty(64, np.int64), np.empty(64, np.float32),
            np.empty(64, np.int64))


@njit(cache=True, boundscheck=False, nogil=True)
def _np_norm_row(h, w, eps, y, st):
    D = h.shape[0]
    r = np.float32(1.0) / np.sqrt(_psum_sq(h, D, st[0], st[1], st[2], st[3]) / np.float32(D) + eps)
    for k in range(D):
        y[k] = (h[k] * r) * w[k]


@njit(cache=True, boundscheck=False, nogil=True)
def np_rms_norm(x, w, eps, y):
    """y = kernels/rmsnorm.ref(x, w, eps) byte for byte (x, y [M, D], w [D] float32, eps a
    float32; numpy's pairwise sum of squares, _psum_sq; the mean's division by D and
    (x * (1 / sqrt(mean + eps))) * w each one float32 operation, as numpy rounds them).
    tests/model/test_norm_np_order.py holds it to numpy's bytes."""
    st = _stack()
    for i in range(x.shape[0]):
        _np_norm_row(x[i], w, eps, y[i], st)


@njit(cache=True, boundscheck=False, nogil=True)
def np_add_rms_norm(x, residual, w, eps, y, h):
    """h = x + residual; y = np_rms_norm(h): kernels/rmsnorm.add_ref byte for byte."""
    D = x.shape[1]
    st = _stack()
    for i in range(x.shape[0]):
        for k in range(D):
            h[i, k] = x[i, k] + residual[i, k]
        _np_norm_row(h[i], w, eps, y[i], st)


SWIGLU_PARALLEL_FROM = 2      # rows from which SwiGLU runs prange (one row: serial)


@njit(cache=True, boundscheck=False, nogil=True)
def swiglu_span(g_row, u_row, out_row, k0, k1):
    """out_row[k] = silu(g_row[k]) * u_row[k] for k in k0 .. k1 - 1."""
    swiglu16(g_row, u_row, out_row, k0, k1)


@njit(cache=True, boundscheck=False, nogil=True)
def _swiglu_row(g_row, u_row, out_row):
    swiglu_span(g_row, u_row, out_row, 0, out_row.shape[0])


@njit(cache=True, parallel=True, boundscheck=False)
def _swiglu_parallel(gu, ff, out):
    for i in prange(gu.shape[0]):
        _swiglu_row(gu[i, :ff], gu[i, ff:], out[i])


@njit(cache=True, boundscheck=False)
def swiglu(gu, ff, out):
    """out = silu(gu[:, :ff]) * gu[:, ff:] (the fused gate|up rows), float32; rows over both
    cores from SWIGLU_PARALLEL_FROM rows (each element the same operations either way)."""
    if gu.shape[0] >= SWIGLU_PARALLEL_FROM:
        _swiglu_parallel(gu, ff, out)
        return
    for i in range(gu.shape[0]):
        _swiglu_row(gu[i, :ff], gu[i, ff:], out[i])
