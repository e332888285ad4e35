"""SwiGLU: silu(gate) * up."""
from __future__ import annotations

import numpy as np


def ref(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    """gate, up: [M, F] -> [M, F]: gate / (1 + exp(-gate)) * up, each step rounded as written
    (in one buffer: the same operations, no temporaries)."""
    t = np.exp(-gate)
    t += np.float32(1.0)
    np.divide(gate, t, out=t)
    t *= up
    return t.astype(np.float32, copy=False)


def clamped(gate: np.ndarray, up: np.ndarray, limit: float = 7.0, alpha: float = 1.702) -> np.ndarray:
    """gpt-oss's clamped SwiGLU: g = min(gate, limit), u = clip(up, -limit, limit),
    out = (u + 1) * g * sigmoid(alpha * g), in float32."""
    g = np.minimum(gate, np.float32(limit))
    u = np.clip(up, np.float32(-limit), np.float32(limit))
    glu = g / (np.float32(1.0) + np.exp(-(np.float32(alpha) * g)))
    return ((u + np.float32(1.0)) * glu).astype(np.float32)


def limited(gate: np.ndarray, up: np.ndarray, limit: float) -> np.ndarray:
    """GLM-5.3-Flash's SwiGLU (swiglu_limit): silu(min(gate, limit)) * clip(up, -limit, limit),
    float32; limit 0: none (ref)."""
    if not limit:
        return ref(gate, up)
    g = np.minimum(gate, np.float32(limit))
    u = np.clip(up, np.float32(-limit), np.float32(limit))
    return (g / (np.float32(1.0) + np.exp(-g)) * u).astype(np.float32)
