"""Row arg-max on the GPU: one launch, one block of 1024 threads a row, returning int32 [R].

The reference is numpy's `argmax(axis=1)`: the first index of the largest value, a NaN
counting as larger than any number (so the first NaN wins). The rule is a total order on
(value, index), so the block's reduction order cannot change the answer. One RawKernel
launch instead of cupy's cast and reduction: the host time of a decode round's greedy
tokens (server/engine/logits.py) drops with it.
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, kernel, launch

_SRC = r"""
// (a, ia) before (b, ib): NaN first, then larger, then the lower index
__device__ __forceinline__ bool before(float a, int ia, float b, int ib) {
    const bool na = a != a, nb = b != b;
    if (na || nb) return na && (!nb || ia < ib);
    return a > b || (a == b && ia < ib);
}
extern "C" __global__ void __launch_bounds__(1024) argmax_rows(const XT* x, long long rs, int V,
                                                               int* out) {
    __shared__ float bv[32];
    __shared__ int bi[32];
    pdl_trigger();
    pdl_wait();
    const XT* row = x + blockIdx.x * rs;
    float v = 0.f;
    int i = -1;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float a = LOAD(row[j]);
        if (i < 0 || before(a, j, v, i)) { v = a; i = j; }
    }
    for (int o = 16; o; o >>= 1) {
        const float v2 = __shfl_xor_sync(FULL, v, o);
        const int i2 = __shfl_xor_sync(FULL, i, o);
        if (i2 >= 0 && (i < 0 || before(v2, i2, v, i))) { v = v2; i = i2; }
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) { bv[w] = v; bi[w] = i; }
    __syncthreads();
    if (w == 0) {
        const int nw = blockDim.x >> 5;
        v = lane < nw ? bv[lane] : 0.f;
        i = lane < nw ? bi[lane] : -1;
        for (int o = 16; o; o >>= 1) {
            const float v2 = __shfl_xor_sync(FULL, v, o);
            const int i2 = __shfl_xor_sync(FULL, i, o);
            if (i2 >= 0 && (i < 0 || before(v2, i2, v, i))) { v = v2; i = i2; }
        }
        if (lane == 0) out[blockIdx.x] = i;
    }
}
"""


def cuda(logits):
    """logits [R, V] float32 or bf16 (unit column stride, any row stride) -> int32 [R]."""
    if logits.ndim != 2 or logits.strides[1] != logits.itemsize:
        logits = cp.ascontiguousarray(logits)
    R, V = logits.shape
    out = cp.empty((R,), dtype=cp.int32)
    if R and V:
        bf = logits.dtype == BF16
        defs = ("XT=bf16", "LOAD(a)=b2f(a)") if bf else ("XT=float", "LOAD(a)=(a)")
        if not bf and logits.dtype != cp.float32:
            logits = logits.astype(cp.float32)
        launch(kernel(_SRC, "argmax_rows", defs), (R,), (1024,), (
            logits, cp.int64(logits.strides[0] // logits.itemsize), cp.int32(V), out))
    return out
