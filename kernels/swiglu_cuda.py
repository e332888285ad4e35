"""silu(gate) * up on the GPU, reading gate and up from the fused gate|up GEMM output
(any row stride), writing bf16 [M, F] for the down projection. The arithmetic is
common_cuda's `silu_mul`, shared with the GEMM's fused epilogue (matmul_fused_cuda.cuda_glu)."""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, csrc, kernel

_SRC = csrc("swiglu.cu")


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
