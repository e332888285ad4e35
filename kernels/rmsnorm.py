"""RMSNorm, and RMSNorm fused with the residual add (the GPU form does both in one pass)."""
from __future__ import annotations

import numpy as np


def ref(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    # x: [M, D] -> [M, D]; the mean of squares in float32, as the reference model does
    var = np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32)
    return (x * (1.0 / np.sqrt(var + np.float32(eps)))).astype(np.float32) * w


def add_ref(x: np.ndarray, residual: np.ndarray, w: np.ndarray, eps: float):
    # returns (rmsnorm(x + residual), x + residual)
    h = x + residual
    return ref(h, w, eps), h
