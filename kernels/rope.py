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


def yarn_inv_freq(head_dim: int, theta: float, factor: float, original_max: int,
                  beta_fast: float = 32.0, beta_slow: float = 1.0, truncate: bool = True):
    """YaRN (gpt-oss: factor 32, original 4096, beta 32 / 1, truncate false) as transformers'
    _compute_yarn_parameters: -> (inv_freq [head_dim/2] float32, attention factor). The
    attention factor (0.1 ln(factor) + 1) multiplies cos and sin there, so q.k by its square:
    the model folds that square into the attention scale."""
    dim = head_dim
    pos = (theta ** (np.arange(0, dim, 2, dtype=np.int64).astype(np.float32) / np.float32(dim))
           ).astype(np.float32)
    extra = (np.float32(1.0) / pos).astype(np.float32)
    inter = (np.float32(1.0) / (np.float32(factor) * pos)).astype(np.float32)

    def corr(rot):
        return dim * math.log(original_max / (rot * 2 * math.pi)) / (2 * math.log(theta))
    low, high = corr(beta_fast), corr(beta_slow)
    if truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - np.float32(low))
                   / np.float32(high - low), 0, 1).astype(np.float32)
    ef = (np.float32(1.0) - ramp).astype(np.float32)
    inv = (inter * (np.float32(1.0) - ef) + extra * ef).astype(np.float32)
    mscale = 1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0
    return inv, mscale
