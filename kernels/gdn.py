"""Gated DeltaNet (Qwen3-Next / Qwen3.5-MoE linear-attention layers), the numpy definition.

One stream's chunk of n positions, this rank's heads (k heads [nk], v heads [nv], each k head
serving r = nv // nk consecutive v heads), from the layer's projections:

    mix [n, C]  C = 2 nk dk + nv dv: q | k | v of this rank's heads, before the convolution
    z   [n, nv dv]   the output gate;   b, a [n, nv]   beta's and the decay's inputs

and the stream's fixed part, updated in place:

    window [K - 1, C]      the convolution's last K - 1 inputs (zeros at position 0)
    state  [nv, dk, dv]    float32, the recurrent state of each v head

Position by position (ONE recurrence order, whatever the chunk: a prompt fed in one round,
in rounds of any size, or token by token ends in the same state and outputs):

    y      = silu(sum_j conv_w[:, j] * [window | mix_t][j])       the short causal conv
    window = its last K - 1 inputs
    q, k   = l2norm(y's q, k per head) (eps 1e-6);  q *= dk ** -0.5;  v = y's v
    for v head h (k head h // r):
        decay = exp(-exp(A_log[h]) * softplus(a_t[h] + dt_bias[h]));  beta = sigmoid(b_t[h])
        S     = S * decay
        delta = (v[h] - S^T k) * beta
        S     = S + k delta^T
        o[h]  = S^T q
        out[h] = rmsnorm(o[h]) * norm_w * silu(z_t[h])            the gated RMSNorm

This is transformers' `torch_recurrent_gated_delta_rule` (its token-by-token path) with the
causal conv and the gated norm around it. The chunked-parallel (WY) form the reference uses
for prompts equals it in exact arithmetic only; foldserve runs the scan for every position.
`kernels/gdn_cpu.py` is the numba form the engine runs (the same operations in a fixed
scalar order); this module is the definition it is tested against.
"""
from __future__ import annotations

import numpy as np

L2_EPS = np.float32(1e-6)


def _silu(x):
    return x / (np.float32(1) + np.exp(-x))


def _softplus(x):
    """torch's softplus (beta 1, threshold 20)."""
    return np.where(x > 20, x, np.log1p(np.exp(np.minimum(x, 20)))).astype(np.float32)


def chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk: int):
    """One stream's positions (see the module doc) -> out [n, nv dv]; window and state are
    updated in place."""
    f = np.float32
    n, C = mix.shape
    K = conv_w.shape[1]
    nv, dk, dv = state.shape
    r = nv // nk
    A = np.exp(A_log.astype(f))
    scale = f(dk ** -0.5)
    out = np.empty((n, nv * dv), f)
    for t in range(n):
        src = np.concatenate([window, mix[t:t + 1]], axis=0)            # [K, C]
        y = _silu(np.sum(conv_w.T * src, axis=0, dtype=f))
        window[:] = src[1:]
        q = y[:nk * dk].reshape(nk, dk)
        k = y[nk * dk:2 * nk * dk].reshape(nk, dk)
        v = y[2 * nk * dk:].reshape(nv, dv)
        q = q / np.sqrt(np.sum(q * q, axis=1, keepdims=True) + L2_EPS) * scale
        k = k / np.sqrt(np.sum(k * k, axis=1, keepdims=True) + L2_EPS)
        decay = np.exp(-(A * _softplus(a[t] + dt_bias)))
        beta = f(1) / (f(1) + np.exp(-b[t]))
        for h in range(nv):
            kh = h // r
            S = state[h]
            S *= decay[h]
            delta = (v[h] - k[kh] @ S) * beta[h]
            S += np.outer(k[kh], delta)
            o = q[kh] @ S
            rr = f(1) / np.sqrt(np.mean(o * o, dtype=f) + f(eps))
            out[t, h * dv:(h + 1) * dv] = (o * rr) * norm_w * _silu(z[t, h * dv:(h + 1) * dv])
    return out
