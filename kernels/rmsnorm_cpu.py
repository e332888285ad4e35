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
