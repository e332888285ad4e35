"""Rotary embedding on the GPU (half-rotation form), reading q or k straight out of the
fused qkv rows (any row stride) and writing contiguous float32 [M, H, hd].
cos/sin are computed in float32 from pos * inv_freq, as the reference does."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import csrc, grid, kernel

_SRC = csrc("rope.cu")


def cuda(x, positions, inv):
    # x: [M, H, hd] float32 (rows may be strided, heads contiguous); positions: [M] int32 (device)
    if x.dtype != cp.float32 or x.strides[2] != 4 or x.strides[1] != x.shape[2] * 4:
        x = cp.ascontiguousarray(x, dtype=cp.float32)
    M, H, hd = x.shape
    pos = cp.asarray(positions, dtype=cp.int32)
    inv = cp.asarray(inv, dtype=cp.float32)
    out = cp.empty((M, H, hd), dtype=cp.float32)
    n = M * H * (hd // 2)
    if n:
        kernel(_SRC, "rope")(grid(n), (256,), (x, cp.int64(x.strides[0] // 4), pos, inv, out,
                                              cp.int32(M), cp.int32(H), cp.int32(hd // 2)))
    return out
