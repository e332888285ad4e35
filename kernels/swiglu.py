"""SwiGLU: silu(gate) * up."""
from __future__ import annotations

import numpy as np


def ref(gate: np.ndarray, up: np.ndarray) -> np.ndarray:
    # gate, up: [M, F] -> [M, F]
    return (gate / (np.float32(1.0) + np.exp(-gate)) * up).astype(np.float32)
