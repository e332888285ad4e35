"""Kimi Delta Attention on the CPU, one numba call a stream's chunk (kernels/kda.py is the
definition: the same steps, see its doc).

One fixed arithmetic per position, as kernels/gdn_cpu.py: the conv's taps summed in tap
order, each reduction (the l2 norms, S^T k, S^T q, the gated norm's mean) a sequential sum in
index order, scalar exp / log1p of libm; position t's work reads only the stream's window and
state as position t - 1 left them. So a chunk of n positions and n single-position calls give
the same bytes (tests/model/test_kda.py), and a row's bytes never depend on other streams or
the round. No fastmath: LLVM may vectorize the loops over v dims (independent lanes), never
reassociate.

Loop order: the conv, the q/k norms and the per-channel decays position by position, then the
recurrence a head at a time over the chunk's positions (a head's state [D, D] stays in cache
over a prefill chunk; heads are independent, so this is the position-major order's
arithmetic element for element, and decode runs the same code). Two passes over a head's
state a position (decay with S^T k, update with S^T q), each element's arithmetic that of
the definition's four steps.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import math

import numpy as np
from numba import njit


@njit(cache=True, boundscheck=False, nogil=True)
def _chunk(mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, window, state, safe, lb, out):
    n, C = mix.shape
    K = conv_w.shape[1]
    H, D, Dv = state.shape
    one = np.float32(1.0)
    scale = np.float32(1.0) / np.float32(math.sqrt(D))
    l2eps = np.float32(1e-6)
    y = np.empty((n, C), np.float32)
    q = np.empty((n, H, D), np.float32)
    k = np.empty((n, H, D), np.float32)
    dec = np.empty((n, H, D), np.float32)
    kv = np.empty(Dv, np.float32)
    d = np.empty(Dv, np.float32)
    o = np.empty(Dv, np.float32)
    # 1. the short causal convolution over [window | mix], position by position; the window
    #    moves on after each
    for t in range(n):
        for c in range(C):
            acc = np.float32(0.0)
            for j in range(K - 1):
                acc += conv_w[c, j] * window[j, c]
            acc += conv_w[c, K - 1] * mix[t, c]
            y[t, c] = acc / (one + np.float32(math.exp(-acc)))
        for j in range(K - 2):
            for c in range(C):
                window[j, c] = window[j + 1, c]
        for c in range(C):
            window[K - 2, c] = mix[t, c]
    # 2. q, k: l2-normed per head, q scaled; each channel's decay exp(g) (each position alone)
    for t in range(n):
        for h in range(H):
            sq = np.float32(0.0)
            sk = np.float32(0.0)
            for i in range(D):
                vq = y[t, h * D + i]
                vk = y[t, H * D + h * D + i]
                sq += vq * vq
                sk += vk * vk
            iq = one / np.float32(math.sqrt(sq + l2eps))
            ik = one / np.float32(math.sqrt(sk + l2eps))
            A = np.float32(math.exp(A_log[h]))
            for i in range(D):
                q[t, h, i] = (y[t, h * D + i] * iq) * scale
                k[t, h, i] = y[t, H * D + h * D + i] * ik
                x = f[t, h * D + i] + dt_bias[h * D + i]
                if safe:
                    g = lb * (one / (one + np.float32(math.exp(-(A * x)))))
                else:
                    sp = x if x > np.float32(20.0) else np.float32(math.log1p(math.exp(x)))
                    g = -(A * sp)
                dec[t, h, i] = np.float32(math.exp(g))
    # 3. the recurrence, a head at a time over the chunk's positions, then the gated norm
    v0 = 2 * H * D
    for h in range(H):
        S = state[h]
        for t in range(n):
            beta = one / (one + np.float32(math.exp(-b[t, h])))
            # two passes over S a position: decay and S^T k together, then the update and
            # S^T q together (each element's operations and each sum's order as in four
            # separate passes: row i is decayed before it is read, updated before o reads it)
            for j in range(Dv):
                kv[j] = np.float32(0.0)
            for i in range(D):
                di = dec[t, h, i]
                ki = k[t, h, i]
                for j in range(Dv):
                    sij = S[i, j] * di
                    S[i, j] = sij
                    kv[j] += sij * ki
            for j in range(Dv):
                d[j] = (y[t, v0 + h * Dv + j] - kv[j]) * beta
                o[j] = np.float32(0.0)
            for i in range(D):
                ki = k[t, h, i]
                qi = q[t, h, i]
                for j in range(Dv):
                    sij = S[i, j] + ki * d[j]
                    S[i, j] = sij
                    o[j] += sij * qi
            ss = np.float32(0.0)
            for j in range(Dv):
                ss += o[j] * o[j]
            rr = one / np.float32(math.sqrt(ss / np.float32(Dv) + eps))
            for j in range(Dv):
                zz = gate[t, h * Dv + j]
                out[t, h * Dv + j] = ((o[j] * rr) * norm_w[j]) * (one / (one + np.float32(math.exp(-zz))))


def chunk(mix, f, b, gate, conv_w, A_log, dt_bias, norm_w, eps, window, state,
          lower_bound=None):
    """kernels/kda.chunk's contract, in numba: out [n, H D]; window and state in place (both
    must be C-contiguous float32 views of the stream's fixed part)."""
    n = mix.shape[0]
    H, _, Dv = state.shape
    out = np.empty((n, H * Dv), np.float32)
    c = np.ascontiguousarray
    safe = lower_bound is not None
    _chunk(c(mix, np.float32), c(f, np.float32), c(b, np.float32), c(gate, np.float32),
           c(conv_w, np.float32), c(A_log, np.float32), c(dt_bias, np.float32),
           c(norm_w, np.float32), np.float32(eps), window, state, safe,
           np.float32(lower_bound if safe else 0.0), out)
    return out
