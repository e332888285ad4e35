"""RMSNorm (and add + RMSNorm in one pass) on the GPU: one block a row (its values kept in
registers), float32 sums in a fixed order set by D alone (so a row's result never depends on
the other rows), bf16 output for the GEMM."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, as_f32, kernel, launch

_SRC = r"""
extern "C" __global__ void rmsnorm(const float* x, const float* res, float* hout,
                                   const bf16* w, bf16* out, int D, float eps) {
    __shared__ float red[32];
    pdl_trigger();
    pdl_wait();
    const long long base = (long long)blockIdx.x * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float v[NPT], ss = 0.f;                  // the row stays in registers: NPT values a thread
#pragma unroll
    for (int u = 0; u < NPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        v[u] = 0.f;
        if (i < D) {
            v[u] = x[base + i];
            if (res) { v[u] = __fadd_rn(v[u], res[base + i]); hout[base + i] = v[u]; }
            ss = __fmaf_rn(v[u], v[u], ss);
        }
    }
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float t = lane < nw ? red[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) red[0] = t;
    }
    __syncthreads();
    const float r = rms_scale(red[0], D, eps);   // common_cuda: shared with the GEMM prologue
#pragma unroll
    for (int u = 0; u < NPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
#if PI_
        // pi order within each 32-element chunk (matmul_cuda.Packed): for a TMA GEMM's x
        if (i < D) out[base + (i & ~31) + 8 * ((i >> 1) & 3) + 2 * ((i >> 3) & 3) + (i & 1)] =
            f2b(rms_apply(v[u], r, w[i]));
#else
        if (i < D) out[base + i] = f2b(rms_apply(v[u], r, w[i]));
#endif
    }
}
"""


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
