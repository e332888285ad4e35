"""Gated DeltaNet on the CPU, one numba call a stream's chunk (kernels/gdn.py is the
definition: the same steps, see its doc).

One fixed arithmetic per position: the conv's taps summed in tap order, each reduction (the
l2 norms, S^T k, S^T q, the gated norm's mean) a sequential sum in index order, scalar exp /
log1p of libm; position t's work reads only the stream's window and state as position t - 1
left them. So a chunk of n positions and n single-position calls give the same bytes
(tests/model/test_gdn.py), and a row's bytes never depend on other streams or the round.
No fastmath: LLVM may vectorize the loops over v dims (independent lanes), never reassociate.

Loop order: the conv and the q/k norms position by position, then the recurrence a v head at
a time over the chunk's positions. A head's state depends on no other head, so this is the
position-major order's arithmetic element for element (a single position, decode, runs the
same code), while a head's state [dk, dv] (64 KiB at 128 x 128) stays in cache over a
prefill chunk instead of streaming every head's state through memory at each position.
"""
from __future__ import annotations

from kernels import require_init  # noqa: E402

require_init(__name__)           # kernels.init() first: numba's cache folder, its env
import math

import numpy as np
from numba import njit


@njit(cache=True, boundscheck=False, nogil=True)
def _chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk, out):
    n, C = mix.shape
    K = conv_w.shape[1]
    nv, dk, dv = state.shape
    r = nv // nk
    one = np.float32(1.0)
    scale = np.float32(1.0) / np.float32(math.sqrt(dk))
    l2eps = np.float32(1e-6)
    y = np.empty((n, C), np.float32)
    q = np.empty((n, nk, dk), np.float32)
    k = np.empty((n, nk, dk), np.float32)
    kv = np.empty(dv, np.float32)
    d = np.empty(dv, np.float32)
    o = np.empty(dv, np.float32)
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
    # 2. q, k: l2-normed per head, q scaled (each position alone)
    for t in range(n):
        for h in range(nk):
            sq = np.float32(0.0)
            sk = np.float32(0.0)
            for i in range(dk):
                vq = y[t, h * dk + i]
                vk = y[t, nk * dk + h * dk + i]
                sq += vq * vq
                sk += vk * vk
            iq = one / np.float32(math.sqrt(sq + l2eps))
            ik = one / np.float32(math.sqrt(sk + l2eps))
            for i in range(dk):
                q[t, h, i] = (y[t, h * dk + i] * iq) * scale
                k[t, h, i] = y[t, nk * dk + h * dk + i] * ik
    # 3. the recurrence, a v head at a time over the chunk's positions (heads are
    #    independent: the same operations on each element as position-major order, with the
    #    head's state kept in cache over the chunk), then the gated norm
    v0 = 2 * nk * dk
    for h in range(nv):
        kh = h // r
        A = np.float32(math.exp(A_log[h]))
        S = state[h]
        for t in range(n):
            x = a[t, h] + dt_bias[h]
            sp = x if x > np.float32(20.0) else np.float32(math.log1p(math.exp(x)))
            decay = np.float32(math.exp(-(A * sp)))
            beta = one / (one + np.float32(math.exp(-b[t, h])))
            for i in range(dk):
                for j in range(dv):
                    S[i, j] = S[i, j] * decay
            for j in range(dv):
                kv[j] = np.float32(0.0)
            for i in range(dk):
                ki = k[t, kh, i]
                for j in range(dv):
                    kv[j] += S[i, j] * ki
            for j in range(dv):
                d[j] = (y[t, v0 + h * dv + j] - kv[j]) * beta
            for i in range(dk):
                ki = k[t, kh, i]
                for j in range(dv):
                    S[i, j] = S[i, j] + ki * d[j]
            for j in range(dv):
                o[j] = np.float32(0.0)
            for i in range(dk):
                qi = q[t, kh, i]
                for j in range(dv):
                    o[j] += S[i, j] * qi
            ss = np.float32(0.0)
            for j in range(dv):
                ss += o[j] * o[j]
            rr = one / np.float32(math.sqrt(ss / np.float32(dv) + eps))
            for j in range(dv):
                zz = z[t, h * dv + j]
                out[t, h * dv + j] = ((o[j] * rr) * norm_w[j]) * (zz / (one + np.float32(math.exp(-zz))))


def chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk: int):
    """kernels/gdn.chunk's contract, in numba: out [n, nv dv]; window and state in place
    (both must be C-contiguous float32 views of the stream's fixed part)."""
    n = mix.shape[0]
    nv, _, dv = state.shape
    out = np.empty((n, nv * dv), np.float32)
    c = np.ascontiguousarray
    _chunk(c(mix, np.float32), c(z, np.float32), c(b, np.float32), c(a, np.float32), conv_w,
           A_log, dt_bias, norm_w, np.float32(eps), window, state, nk, out)
    return out
