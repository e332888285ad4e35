"""silu(gate) * up on the GPU, reading gate and up from the fused gate|up GEMM output
(any row stride), writing bf16 [M, F] for the down projection. The arithmetic is
common_cuda's `silu_mul`, shared with the GEMM's fused epilogue (matmul_cuda.cuda_glu)."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, kernel

_SRC = r"""
// grid (ceil(F / 1024), min(M, 65535)), 256 threads: a block covers 1,024 columns of a row
// (rows strided by the grid's y), each thread 4 of them, 256 apart (no 64-bit division)
extern "C" __global__ void swiglu(const float* g, const float* u, long long rs, bf16* out,
                                  int M, int F) {
    for (long long m = blockIdx.y; m < M; m += gridDim.y) {
        const float* gr = g + m * rs;
        const float* ur = u + m * rs;
        bf16* o = out + m * F;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int f = blockIdx.x * 1024 + e * 256 + threadIdx.x;
            if (f < F) o[f] = f2b(silu_mul(gr[f], ur[f]));
        }
    }
}
"""


def cuda(gate, up):
    # gate, up: [M, F] float32 with unit column stride and equal row strides -> [M, F] bf16
    ok = (gate.dtype == up.dtype == cp.float32 and gate.strides == up.strides
          and gate.strides[1] == 4)
    if not ok:
        gate, up = cp.ascontiguousarray(gate, cp.float32), cp.ascontiguousarray(up, cp.float32)
    M, F = gate.shape
    out = cp.empty((M, F), dtype=BF16)
    if M * F:
        kernel(_SRC, "swiglu")((-(-F // 1024), min(M, 65535)), (256,),
                               (gate, up, cp.int64(gate.strides[0] // 4), out, cp.int32(M), cp.int32(F)))
    return out
