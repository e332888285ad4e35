"""Row arg-max on the GPU: one launch, one block of 1024 threads a row, returning int32 [R].

The reference is numpy's `argmax(axis=1)`: the first index of the largest value, a NaN
counting as larger than any number (so the first NaN wins). The rule is a total order on
(value, index), so the block's reduction order cannot change the answer. One RawKernel
launch instead of cupy's cast and reduction: the host time of a decode round's greedy
tokens (server/engine/logits.py) drops with it.
"""
from __future__ import annotations

import cupy as cp

from kernels.common_cuda import BF16, csrc, kernel, launch

_SRC = csrc("argmax.cu")


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
