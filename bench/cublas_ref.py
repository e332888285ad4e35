"""Plain cuBLAS beside our GEMMs, for the benchmarks' "what invariance costs" (never the
product: cuBLAS picks its kernel from the shape, so its rows change with M).

- `plain(x, w)`: one cuBLAS GEMM, x [M, K] @ w[N, K]^T -> [M, N] float32 (fastest at large M,
  NOT batch invariant); w: [N, K] bf16, or a Packed made while `keep_plain()` held (its
  [N, K] form kept beside it as `.plain`).
- `keep_plain()`: from now on the packed weights (kernels/matmul_packed_cuda.pack, and so
  pack_weights at a model's load) keep their [N, K] form, so cuBLAS runs on the same numbers.
- `use_cublas(True)`: the GEMM entry points the model calls (kernels/matmul_cuda.cuda,
  matmul_fused_cuda.cuda_glu and cuda_norm) run every GEMM the dispatcher would choose
  through `plain`, with the norm and SwiGLU as their own kernels (rmsnorm_cuda, swiglu_cuda); a forced kernel
  (`force=`) still runs ours. `use_cublas(False)` puts ours back.

  from bench import cublas_ref
  cublas_ref.keep_plain()
  cublas_ref.use_cublas(True)   # ... time ... ; cublas_ref.use_cublas(False)
"""
from __future__ import annotations

import ctypes

import cupy as cp
import numpy as np

from kernels import matmul_cuda as MM
from kernels import matmul_fused_cuda as FU
from kernels import matmul_packed_cuda as PK
from kernels.common_cuda import as_bf16, as_f32
from kernels.matmul_mma_cuda import stream_cfg
from kernels.matmul_pi_cuda import Pi

_R_16BF, _R_32F, _COMPUTE_32F, _DEFAULT = 14, 0, 68, -1
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)
_WORKSPACE = 32 << 20


class _Cublas:
    """cuBLAS through ctypes on cupy's handle (cupy's wrappers refuse to run while a stream
    captures). cublasSetStream resets the workspace to cuBLAS's own pool, so the fixed
    workspace is set again after every stream change."""

    def __init__(self):
        self.handle = cp.cuda.device.get_cublas_handle()      # loads libcublas
        path = next(line.split()[-1] for line in open("/proc/self/maps")
                    if "libcublas.so" in line and "libcublasLt" not in line)
        self.lib = ctypes.CDLL(path)
        self.ws = cp.empty(_WORKSPACE, dtype=cp.uint8)
        self.stream = None

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"cublas{what} failed with status {status}")

    def gemm_tn(self, M, N, K, x, w, c):
        # row-major C[M, N] = x[M, K] @ w[N, K]^T  (column-major: C^T = w^T' x^T)
        s = cp.cuda.get_current_stream().ptr
        V, I = ctypes.c_void_p, ctypes.c_int
        if s != self.stream:
            self._check(self.lib.cublasSetStream_v2(V(self.handle), V(s)), "SetStream")
            self._check(self.lib.cublasSetWorkspace_v2(V(self.handle), V(self.ws.data.ptr),
                                                       ctypes.c_size_t(_WORKSPACE)), "SetWorkspace")
            self.stream = s
        self._check(self.lib.cublasGemmEx(
            V(self.handle), I(1), I(0), I(N), I(M), I(K), V(_ONE.ctypes.data), V(w), I(_R_16BF),
            I(K), V(x), I(_R_16BF), I(K), V(_ZERO.ctypes.data), V(c), I(_R_32F), I(N),
            I(_COMPUTE_32F), I(_DEFAULT)), "GemmEx")


_blas = None


def plain(x, w):
    """One cuBLAS GEMM, x [M, K] @ w[N, K]^T -> [M, N] float32. Not batch invariant.
    w: [N, K] bf16, or a Packed whose unpacked form is kept as `.plain` (`keep_plain`)."""
    if isinstance(w, PK.Packed):
        w = w.plain
    global _blas
    if _blas is None:
        _blas = _Cublas()
    x = as_bf16(x)
    M, K = x.shape
    out = cp.empty((M, w.shape[0]), dtype=cp.float32)
    if M:
        _blas.gemm_tn(M, w.shape[0], K, x.data.ptr, w.data.ptr, out.data.ptr)
    return out


# -- keeping [N, K] beside the packed weights ----------------------------------------------
_OURS: dict = {}


def keep_plain() -> None:
    """Packed weights made from now on carry their [N, K] form as `.plain` (idempotent)."""
    if "pack" in _OURS:
        return
    ours = _OURS["pack"] = PK.pack

    def pack(w):
        p = ours(w)
        if p is not w and isinstance(p, PK.Packed):
            p.plain = w                       # cuBLAS on the same numbers
        return p
    PK.pack = pack


# -- every dispatched GEMM through cuBLAS ---------------------------------------------------
def _natural(x):
    return x.natural() if isinstance(x, Pi) else x


def _cuda(x, w, bias=None, force: str | None = None, cfg: tuple | None = None):
    if force is not None:
        return _OURS["cuda"](x, w, bias, force=force, cfg=cfg)
    out = plain(_natural(x), w)
    return out if bias is None else out + as_f32(bias)


def _cuda_glu(x, w, F: int, bias=None, force: str | None = None, cfg: tuple | None = None,
              pi_out: bool = False):
    """The GEMM (cuBLAS), then swiglu_cuda. As the cuBLAS figures of earlier receipts were
    made: a wide gate|up at 17..64 rows (where the dispatcher picks wgmma_cuda) stays on
    wgmma_cuda."""
    from kernels import swiglu_cuda
    x = _natural(x)
    M, K = x.shape
    cfg = cfg or stream_cfg(M)
    if (force is None and cfg is not None and MM.WGMMA and M >= MM.WGMMA_SMALL[0]
            and w.shape[0] == 2 * F and MM.wgmma_cuda().available(M, 2 * F, K, MM.WGMMA_SMALL[1])):
        force = "wgmma"
    gu = _cuda(x, w, bias, force=force, cfg=cfg)
    return swiglu_cuda.cuda(gu[:, :F], gu[:, F:])


def _cuda_norm(xo, h, norm_w, eps, w, bias=None, glu_F: int | None = None, fuse: bool | None = None,
               cfg: tuple | None = None, pi_out: bool = False):
    """rmsnorm_cuda (natural order), then the GEMM through cuBLAS (`_cuda` / `_cuda_glu`)."""
    from kernels import rmsnorm_cuda
    if xo is None:
        x, hn = rmsnorm_cuda.cuda(h, norm_w, eps, False), h
    else:
        x, hn = rmsnorm_cuda.add_cuda(xo, h, norm_w, eps, False)
    return (_cuda(x, w, bias) if glu_F is None else _cuda_glu(x, w, glu_F, bias, pi_out=pi_out)), hn


def use_cublas(on: bool) -> None:
    """on: matmul_cuda.cuda, matmul_fused_cuda.cuda_glu and cuda_norm run their GEMMs through
    cuBLAS (force= excepted); off: ours again."""
    if on and "cuda" not in _OURS:
        _OURS.update(cuda=MM.cuda, cuda_glu=FU.cuda_glu, cuda_norm=FU.cuda_norm)
        MM.cuda, FU.cuda_glu, FU.cuda_norm = _cuda, _cuda_glu, _cuda_norm
    elif not on and "cuda" in _OURS:
        MM.cuda, FU.cuda_glu, FU.cuda_norm = (_OURS.pop(k) for k in ("cuda", "cuda_glu", "cuda_norm"))
