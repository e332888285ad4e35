"""Rotary embedding on the GPU (half-rotation form), reading q or k straight out of the
fused qkv rows (any row stride) and writing contiguous float32 [M, H, hd].
cos/sin are computed in float32 from pos * inv_freq, as the reference does."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import grid, kernel

_SRC = r"""
extern "C" __global__ void rope(const float* x, long long rs, const int* pos, const float* inv,
                                float* out, int M, int H, int half) {
    const long long n = (long long)M * H * half;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const int i = idx % half;
        const long long t = idx / half;
        const int h = t % H;
        const long long m = t / H;
        const float* xr = x + m * rs + (long long)h * 2 * half;
        float a = xr[i], b = xr[i + half];
        rope_pair(a, b, pos[m], inv[i]);
        float* o = out + (m * H + h) * 2 * half;
        o[i] = a;
        o[i + half] = b;
    }
}
"""


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
