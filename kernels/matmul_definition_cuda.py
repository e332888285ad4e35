"""The arithmetic of every GEMM on the GPU (x @ W^T, mma.sync m16n8k16, bf16 operands, float32
accumulation and output), and the definition kernel that runs it plainly (tests).

The arithmetic of one output element C[m, n] is fixed and depends on nothing but row m of
x, row n of W and K:
  * K is cut into chunks of 32 (a last partial chunk reads zeros past K), and the chunks
    into KSPLIT ranges: range q = chunks [q nch / KSPLIT, (q + 1) nch / KSPLIT);
  * within a chunk, lane t of a quad holds k = 8t .. 8t+7 of its row; the first mma takes
    k in {8t .. 8t+3 : t = 0..3}, the second {8t+4 .. 8t+7}: the same fixed permutation of k
    for x and W, so the product is x.W and the order is one and the same in every kernel;
  * a range's sum starts at 0 and each mma adds its 16 products (the hardware's order within
    one instruction is fixed), chunk after chunk;
  * C = ((((0 + range 0) + range 1) + ...) + range KSPLIT-1) + bias[n] (bf16 widened).
Every kernel that runs a GEMM keeps it, whatever its scheduling: kernels/matmul_mma_cuda.py
(stream, tiled, split), kernels/wgmma_cuda.py, kernels/wgmma_tma_cuda.py, kernels/qmatmul_cuda.py
on dequantized weights; kernels/matmul_cuda.py picks one by shape. Every row's bytes are the same
in all of them, whatever the other rows (tests/gpu/test_gemm_definition.py holds each to
`definition`; tests/gpu/test_kernels.py holds rows alone against rows among others). That is
what makes solo == concurrent, resumed == fresh (decoded rows == prefilled rows) and graph ==
eager hold for the GEMMs; cuBLAS picks its kernel (tiles, split-K) from the shape, so its rows
change with M (gpu-notes), and is not used for them (bench/cublas_ref.py: benchmarks only).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, as_bf16, csrc, kernel

KSPLIT = 8             # K ranges summed apart, then folded in order: ARITHMETIC (all kernels)

NULL = np.uint64(0)    # a null pointer kernel argument (no bias, no residual)

_DEFINITION = csrc("matmul_mma.cuh", "matmul_definition.cu")


def bias_arg(bias):
    """The kernels' bias argument: a bf16 [N] array, or NULL for none."""
    if bias is None:
        return NULL                                        # a null pointer: no bias
    return bias if bias.dtype == BF16 else as_bf16(bias)


def check(x, w) -> None:
    if w.shape[1] != x.shape[1] or x.shape[1] % 8:
        raise ValueError(f"matmul: x {x.shape} against w {w.shape} (K must match and be a multiple of 8)")


def definition(x, w, bias=None):
    """x [M, K] bf16 @ w [N, K] bf16 (plain, not Packed; K % 8 == 0) -> [M, N] float32 by the
    definition kernel (slow; tests)."""
    M, K = x.shape
    N = w.shape[0]
    out = cp.empty((M, N), dtype=cp.float32)
    kernel(_DEFINITION, "definition", (f"S_={KSPLIT}",))(
        (-(-N // 8), -(-M // 16)), (32,), (as_bf16(x), as_bf16(w), bias_arg(bias), out,
                                            np.int32(M), np.int32(N), np.int32(K)))
    return out
