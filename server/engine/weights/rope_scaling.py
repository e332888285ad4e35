"""Llama 3.1 rope scaling: the per-frequency divisors, and recovering their parameters.

llama.cpp stores Llama 3.1 scaling not as metadata but as a `rope_freqs` tensor of
divisors, one per rotary frequency (hd/2 of them). We recognise the usual parameters
(low_freq_factor 1, high_freq_factor 4) by recomputing the divisors and comparing.
"""
from __future__ import annotations

import math

import numpy as np


def llama3_divisors(head_dim: int, theta: float, scaling: tuple) -> np.ndarray:
    # scaling: (factor, low_freq_factor, high_freq_factor, original_max_context)
    factor, low, high, orig = scaling
    freqs = theta ** (-np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    out = np.empty_like(freqs)
    for j, f in enumerate(freqs):
        wavelen = 2 * math.pi / f
        if wavelen < orig / high:
            out[j] = 1.0
        elif wavelen > orig / low:
            out[j] = factor
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out[j] = 1.0 / ((1 - smooth) / factor + smooth)
    return out


def recover(divisors: np.ndarray, head_dim: int, theta: float, orig: int | None) -> tuple | None:
    """The scaling tuple that produces `divisors`, or None when none of the usual ones does."""
    divisors = np.asarray(divisors, dtype=np.float64).reshape(-1)
    factor = float(divisors.max())
    for low, high in ((1.0, 4.0), (1.0, 2.0)):
        for o in ([orig] if orig else [8192, 4096, 2048]):
            cand = (factor, low, high, int(o))
            want = llama3_divisors(head_dim, theta, cand)
            if want.shape == divisors.shape and np.allclose(want, divisors, rtol=1e-3):
                return cand
    return None
