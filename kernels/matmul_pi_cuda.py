"""The pi order of a 32-k chunk on the GPU: the order in which the GEMM arithmetic's two k16
steps take k (position p = 16h + 8b + 2t + e holds k = 8t + 4h + 2b + e; matmul_packed_cuda.Packed
stores W so, kernels/csrc/pi_order.cuh). The TMA GEMM (kernels/wgmma_tma_cuda.py) reads x in
this order too: `permute` makes it from a natural-order x (a 4x4 transpose of 32-bit words per
chunk, its own inverse), or the producer of x writes it so and hands on a `Pi` (rmsnorm_cuda's
`pi`, attention_cuda's `pi`, the TMA GLU epilogue's `pi_out`), and the permute launch is saved.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.common_cuda import csrc, kernel

_PERMUTE = csrc("pi_order.cuh", "permute_k32.cu")


def permute(x):
    """x [..., K] bf16 (K % 32 == 0) with each 32-k chunk in pi order (a new array); the same
    call turns pi order back into natural order."""
    out = cp.empty_like(x)
    n = x.size // 8
    if n:
        kernel(_PERMUTE, "permute_k32")((-(-n // 256),), (256,), (x, out, np.int64(n)))
    return out


class Pi:
    """A bf16 [M, K] activation that its producer wrote with each 32-k chunk in pi order
    (`Packed`'s order), for the TMA GEMM, which then skips its permute (rmsnorm_cuda's `pi`,
    the TMA GLU epilogue's `pi_out`); any other path takes `natural()` (the permute is its own
    inverse): the same bytes as a natural-order x either way."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def natural(self):
        return permute(self.a)

    def reshape(self, *shape):
        return Pi(self.a.reshape(*shape))


def unpi(x, tma: bool):
    """(x for the chosen path, whether it is in pi order): a Pi stays so only for the TMA path."""
    if not isinstance(x, Pi):
        return x, False
    return (x.a, True) if tma else (x.natural(), False)
