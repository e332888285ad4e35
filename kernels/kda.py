"""Kimi Delta Attention (Kimi-Linear's and GLM-5.3-Flash's linear-attention layers), the
numpy definition.

KDA is Gated DeltaNet (kernels/gdn.py) with the decay per channel: a gate vector a head
(one value per k dim) where GDN has one scalar a head. One stream's chunk of n positions,
this rank's H heads (q, k and v heads alike, head dim D), from the layer's projections:

    mix  [n, 3 H D]   q | k | v of this rank's heads, before the convolution
    f    [n, H D]     the forget gate's input, f_b(f_a(x)) (dt_bias not yet added)
    b    [n, H]       beta's input, b_proj(x)
    gate [n, H D]     the output gate's input, g_b(g_a(x))

and the stream's fixed part, updated in place:

    window [K - 1, 3 H D]   the convolution's last K - 1 inputs (zeros at position 0)
    state  [H, D, D]        float32, the recurrent state of each head (k dim x v dim)

Position by position (ONE recurrence order, whatever the chunk: a prompt fed in one round,
in rounds of any size, or token by token ends in the same state and outputs):

    y      = silu(sum_j conv_w[:, j] * [window | mix_t][j])        the short causal conv
    window = its last K - 1 inputs
    q, k   = l2norm(y's q, k per head) (x / sqrt(sum x^2 + 1e-6));  q *= D ** -0.5
    x      = f_t + dt_bias                                          [H, D]
    g      = -exp(A_log[h]) * softplus(x)                           Kimi-Linear
           = lower_bound * sigmoid(exp(A_log[h]) * x)               the "safe gate" (GLM-5.3)
    for head h:
        S     = S * exp(g[h])[:, None]          each k row of the state decays by its own gate
        delta = (v[h] - S^T k[h]) * sigmoid(b_t[h])
        S     = S + k[h] delta^T
        o     = S^T q[h]
        out[h] = rmsnorm(o) * norm_w * sigmoid(gate_t[h])          the gated RMSNorm (eps)

This is transformers' `recurrent_kimi_delta_attention` (its token-by-token path) with
`causal_conv1d_fn`, the forget gate (`KimiLinearForgetGate`; `Glm5NextTextForgetGate` with its
`safe_gate_lower_bound`) and `KimiLinearRMSNormGated` around it. softplus is torch's
(threshold 20; log1p below it). The chunked form transformers runs for prompts
(`chunk_kimi_delta_attention`, 64-row chunks) equals it in exact arithmetic only; foldserve
runs the scan for every position. `kernels/kda_cpu.py` is the numba form the engine runs (the
same operations in a fixed scalar order); this module is the definition it is tested against.
"""
from __future__ import annotations

import numpy as np

L2_EPS = np.float32(1e-6)


def _silu(x):
    return x / (np.float32(1) + np.exp(-x))


def _sigmoid(x):
    return np.float32(1) / (np.float32(1) + np.exp(-x))


def _softplus(x):
    """torch's softplus (beta 1, threshold 20)."""
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).astype(np.float32)


def log_decay(f, A_log, dt_bias, lower_bound=None):
    """g [n, H, D], the log of each channel's decay: -exp(A_log) softplus(f + dt_bias), or with
    a lower bound lb (the safe gate), lb * sigmoid(exp(A_log) (f + dt_bias)), in (lb, 0)."""
    f32 = np.float32
    H = A_log.shape[0]
    x = (f.astype(f32) + dt_bias.astype(f32)).reshape(f.shape[0], H, -1)
    A = np.exp(A_log.astype(f32)).reshape(H, 1)
    if lower_bound is None:
        return (-(A * _softplus(x))).astype(f32)
    return (f32(lower_bound) * _sigmoid(A * x)).astype(f32)


def chunk(mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, window, state,
          lower_bound=None):
    """One stream's positions (see the module doc) -> out [n, H D]; window and state are
    updated in place."""
    f32 = np.float32
    n, C = mix.shape
    H, D, Dv = state.shape
    scale = f32(D ** -0.5)
    g = log_decay(f, A_log, dt_bias, lower_bound)
    out = np.empty((n, H * Dv), f32)
    for t in range(n):
        src = np.concatenate([window, mix[t:t + 1]], axis=0)            # [K, C]
        y = _silu(np.sum(conv_w.T * src, axis=0, dtype=f32))
        window[:] = src[1:]
        q = y[:H * D].reshape(H, D)
        k = y[H * D:2 * H * D].reshape(H, D)
        v = y[2 * H * D:].reshape(H, Dv)
        q = q / np.sqrt(np.sum(q * q, axis=1, keepdims=True) + L2_EPS) * scale
        k = k / np.sqrt(np.sum(k * k, axis=1, keepdims=True) + L2_EPS)
        decay = np.exp(g[t])                                             # [H, D]
        beta = _sigmoid(b[t])
        for h in range(H):
            S = state[h]
            S *= decay[h][:, None]
            delta = (v[h] - k[h] @ S) * beta[h]
            S += np.outer(k[h], delta)
            o = q[h] @ S
            rr = f32(1) / np.sqrt(np.mean(o * o, dtype=f32) + f32(eps))
            out[t, h * Dv:(h + 1) * Dv] = (o * rr) * norm_w * _sigmoid(gate[t, h * Dv:(h + 1) * Dv])
    return out
