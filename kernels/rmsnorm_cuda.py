"""RMSNorm (and add + RMSNorm in one pass) on the GPU: one block a row (its values kept in
registers), float32 sums in a fixed order set by D alone (so a row's result never depends on
the other rows), bf16 output for the GEMM."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, as_f32, csrc, kernel, launch

_SRC = csrc("rmsnorm.cu")


def _run(x, res, w, eps, pi=False):
    shape = x.shape
    x = as_f32(x).reshape(-1, shape[-1])
    M, D = x.shape
    out = cp.empty((M, D), dtype=BF16)
    h = cp.empty((M, D), dtype=cp.float32) if res is not None else None
    if res is not None:
        res = as_f32(res).reshape(M, D)
    threads = min(1024, (D + 31) // 32 * 32)              # by D only: the sums' order is fixed
    if M:
        launch(kernel(_SRC, "rmsnorm", (f"NPT={-(-D // threads)}", f"PI_={int(pi)}")), (M,), (threads,),
               (x, res, h, w, out, cp.int32(D), cp.float32(eps)))
    return out.reshape(shape), None if h is None else h.reshape(shape)


def cuda(x, w, eps, pi=False):
    # x: [M, D] float32 (or bf16), w: [D] bf16 -> [M, D] bf16 (pi: each 32-element chunk in
    # pi order, D % 32 == 0, for matmul_cuda's TMA GEMM)
    return _run(x, None, w, eps, pi)[0]


def add_cuda(x, residual, w, eps, pi=False):
    # returns (rmsnorm(x + residual) [M, D] bf16, x + residual [M, D] float32)
    return _run(x, residual, w, eps, pi)
