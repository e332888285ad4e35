"""Rotary position embedding, half-rotation form (the Hugging Face layout; GGUF's
interleaved q/k rows are un-permuted at load so one form serves every checkpoint)."""
from __future__ import annotations

import math

import numpy as np


def inv_freq(head_dim: int, theta: float, scaling: tuple | None = None) -> np.ndarray:
    """[head_dim/2] float32; Llama 3.1 scaling (factor, low, high, original_max) if given."""
    f = 1.0 / (theta ** (np.arange(0, head_dim, 2, dtype=np.int64).astype(np.float32) / head_dim))
    f = f.astype(np.float32)
    if scaling:
        factor, low, high, orig = scaling
        low_wl, high_wl = orig / low, orig / high
        wl = 2 * math.pi / f
        smooth = (orig / wl - low) / (high - low)
        scaled = np.where(wl > low_wl, f / factor, f)
        mid = (1 - smooth) * scaled / factor + smooth * scaled
        is_mid = (wl >= high_wl) & (wl <= low_wl)
        f = np.where(is_mid, mid, scaled).astype(np.float32)
    return f


def cos_sin(positions: np.ndarray, inv: np.ndarray):
    # positions: [M] -> cos, sin: [M, hd/2] float32
    freqs = positions.astype(np.float32)[:, None] * inv[None, :]
    return np.cos(freqs).astype(np.float32), np.sin(freqs).astype(np.float32)


def ref(x: np.ndarray, positions: np.ndarray, inv: np.ndarray) -> np.ndarray:
    # x: [M, H, hd] -> [M, H, hd]
    half = x.shape[-1] // 2
    cos, sin = cos_sin(positions, inv)
    cos, sin = cos[:, None, :], sin[:, None, :]
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1).astype(np.float32)
