"""x @ W on the GPU through cuBLAS: bf16 operands, float32 accumulation and output.

Batch invariance: cuBLAS picks its kernel (tiles, split-K) from the shape, so a row's
summation order can change with the row count (gpu-notes: rows differ from M = 32 on).
INVARIANT (the default) therefore always runs the same problem: M padded to a multiple of
TILE rows, one cuBLAS call of exactly TILE x N x K per tile. Every row then goes through
the same call whatever else is in the round; tests/gpu checks rows are bit-identical
across M. (One strided-batched call over the tiles is NOT invariant: measured on an H200,
cuBLAS picks another kernel at batchCount 2 than at 1; PER_TILE_CALLS = False keeps it
for measurement only.) INVARIANT = False is one plain GEMM (faster at large M; the
benchmark receipt gives the cost of invariance).
"""
from __future__ import annotations

import ctypes

import cupy as cp
import numpy as np

from kernels.common_cuda import as_bf16, as_f32

TILE = 128   # rows per cuBLAS call; measured on an H200 against 16, 64, 256 (receipt)
INVARIANT = True
PER_TILE_CALLS = True       # False: one strided-batched call (faster, not invariant)

_R_16BF, _R_32F, _COMPUTE_32F, _DEFAULT = 14, 0, 68, -1
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)
_WORKSPACE = 32 << 20


class _Cublas:
    """cuBLAS called through ctypes on cupy's handle: cupy's own wrappers refuse to run
    while a stream captures (seen on cupy 14.2), and decode rounds are CUDA graphs."""

    def __init__(self):
        self.handle = cp.cuda.device.get_cublas_handle()      # loads libcublas
        path = next(line.split()[-1] for line in open("/proc/self/maps")
                    if "libcublas.so" in line and "libcublasLt" not in line)
        self.lib = ctypes.CDLL(path)
        self.ws = cp.empty(_WORKSPACE, dtype=cp.uint8)        # fixed workspace: nothing allocated in capture
        self._check(self.lib.cublasSetWorkspace_v2(ctypes.c_void_p(self.handle),
                                                   ctypes.c_void_p(self.ws.data.ptr),
                                                   ctypes.c_size_t(_WORKSPACE)), "SetWorkspace")
        self.stream = None

    @staticmethod
    def _check(status, what):
        if status != 0:
            raise RuntimeError(f"cublas{what} failed with status {status}")

    def gemm(self, m, n, k, a, lda, b, ldb, c, ldc):
        # column-major C[m, n] = A[m, k] B[k, n]: A, B bf16, C float32, float32 compute
        s = cp.cuda.get_current_stream().ptr
        if s != self.stream:
            self._check(self.lib.cublasSetStream_v2(ctypes.c_void_p(self.handle), ctypes.c_void_p(s)),
                        "SetStream")
            self.stream = s
        V, I = ctypes.c_void_p, ctypes.c_int
        self._check(self.lib.cublasGemmEx(
            V(self.handle), I(0), I(0), I(m), I(n), I(k), V(_ONE.ctypes.data), V(a), I(_R_16BF),
            I(lda), V(b), I(_R_16BF), I(ldb), V(_ZERO.ctypes.data), V(c), I(_R_32F), I(ldc),
            I(_COMPUTE_32F), I(_DEFAULT)), "GemmEx")


_blas = None


def _lib():
    global _blas
    if _blas is None:
        _blas = _Cublas()
    return _blas


def cuda(x, w, bias=None):
    # x: [M, K] bf16 (float32 is converted), w: [K, N] bf16 -> [M, N] float32
    x = as_bf16(x)
    M, K = x.shape
    N = w.shape[1]
    blas = _lib()
    if INVARIANT:
        Mp = -(-M // TILE) * TILE
        if Mp != M:
            xp = cp.zeros((Mp, K), dtype=x.dtype)
            xp[:M] = x
            x = xp
        out = cp.empty((Mp, N), dtype=cp.float32)
        if PER_TILE_CALLS:
            for t in range(Mp // TILE):
                blas.gemm(N, TILE, K, w.data.ptr, N, x.data.ptr + t * TILE * K * 2, K,
                          out.data.ptr + t * TILE * N * 4, N)
        elif Mp:
            from cupy_backends.cuda.libs import cublas
            cublas.gemmStridedBatchedEx(blas.handle, 0, 0, N, TILE, K, _ONE.ctypes.data,
                                        w.data.ptr, _R_16BF, N, 0, x.data.ptr, _R_16BF, K,
                                        TILE * K, _ZERO.ctypes.data, out.data.ptr, _R_32F, N,
                                        TILE * N, Mp // TILE, _COMPUTE_32F, _DEFAULT)
            blas.stream = None                          # cupy set the handle's stream itself
        out = out[:M]
    else:
        out = cp.empty((M, N), dtype=cp.float32)
        if M:
            blas.gemm(N, M, K, w.data.ptr, N, x.data.ptr, K, out.data.ptr, N)
    if bias is not None:
        out += as_f32(bias)
    return out
