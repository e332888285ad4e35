"""Gated DeltaNet on the CPU, one numba call a stream's chunk (kernels/gdn.py is the
definition: the same steps, see its doc).

One fixed arithmetic per position: the conv's taps summed in tap order, each reduction (the
l2 norms, S^T k, S^T q, the gated norm's mean) a sequential sum in index order, scalar exp /
log1p of libm; position t's work reads only the stream's window and state as position t - 1
left them. So a chunk of n positions and n single-position calls give the same bytes
(tests/model/test_gdn.py), and a row's bytes never depend on other streams or the round.
No fastmath: LLVM may vectorize the loops over v dims (independent lanes), never reassociate.

Loop order: the conv and the q/k norms position by position, then the recurrence a v head at
a time over the chunk's positions. A prefill chunk runs as one crew round (both cores: the
conv's channels, the norms' positions and the v heads are independent pieces, each computed
by the same code whoever takes it), decode on the caller alone. A head's state depends on no other head, so this is the
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

from kernels.team_cpu import finish, next_piece, wait


CONV_SPAN = 256         # channels a piece of the conv stage
NORM_SPAN = 8           # positions a piece of the q/k norm stage
CREW_SERIAL = 1 << 18   # at most this many state elements x positions: the caller alone


@njit(cache=True, boundscheck=False, nogil=True)
def _conv(mix, conv_w, window, y, c0, c1):
    """1. the short causal convolution of channels [c0, c1) over [window | mix], position by
    position (each channel's taps summed in tap order), then silu; the window moves on after
    each position. Channels are independent: any split of them gives the same bytes."""
    n = mix.shape[0]
    K = conv_w.shape[1]
    one = np.float32(1.0)
    for t in range(n):
        for c in range(c0, c1):
            acc = np.float32(0.0)
            for j in range(K - 1):
                acc += conv_w[c, j] * window[j, c]
            acc += conv_w[c, K - 1] * mix[t, c]
            y[t, c] = acc / (one + np.float32(math.exp(-acc)))
        for j in range(K - 2):
            for c in range(c0, c1):
                window[j, c] = window[j + 1, c]
        for c in range(c0, c1):
            window[K - 2, c] = mix[t, c]


@njit(cache=True, boundscheck=False, nogil=True)
def _norms(y, nk, dk, q, k, t0, t1):
    """2. q, k of positions [t0, t1): l2-normed per head (a sequential sum), q scaled."""
    one = np.float32(1.0)
    scale = np.float32(1.0) / np.float32(math.sqrt(dk))
    l2eps = np.float32(1e-6)
    for t in range(t0, t1):
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


@njit(cache=True, boundscheck=False, nogil=True)
def _head(h, y, z, b, a, A_log, dt_bias, norm_w, eps, state, nk, q, k, out):
    """3. v head h's recurrence over the chunk's positions, then its gated norm (a head's
    state depends on no other head: the position-major order's arithmetic element for
    element, the head's state kept in cache over the chunk)."""
    n = y.shape[0]
    nv, dk, dv = state.shape
    r = nv // nk
    one = np.float32(1.0)
    kv = np.empty(dv, np.float32)
    d = np.empty(dv, np.float32)
    o = np.empty(dv, np.float32)
    v0 = 2 * nk * dk
    kh = h // r
    A = np.float32(math.exp(A_log[h]))
    S = state[h]
    for t in range(n):
        x = a[t, h] + dt_bias[h]
        sp = x if x > np.float32(20.0) else np.float32(math.log1p(math.exp(x)))
        decay = np.float32(math.exp(-(A * sp)))
        beta = one / (one + np.float32(math.exp(-b[t, h])))
        # two walks of the state a position: the decay fused with S^T k, the update with
        # S^T q (each element's arithmetic and each sum's order those of the four steps)
        for j in range(dv):
            kv[j] = np.float32(0.0)
        for i in range(dk):
            ki = k[t, kh, i]
            for j in range(dv):
                sd = S[i, j] * decay
                S[i, j] = sd
                kv[j] += sd * ki
        for j in range(dv):
            d[j] = (y[t, v0 + h * dv + j] - kv[j]) * beta
        for j in range(dv):
            o[j] = np.float32(0.0)
        for i in range(dk):
            ki = k[t, kh, i]
            qi = q[t, kh, i]
            for j in range(dv):
                su = S[i, j] + ki * d[j]
                S[i, j] = su
                o[j] += su * qi
        ss = np.float32(0.0)
        for j in range(dv):
            ss += o[j] * o[j]
        rr = one / np.float32(math.sqrt(ss / np.float32(dv) + eps))
        for j in range(dv):
            zz = z[t, h * dv + j]
            out[t, h * dv + j] = ((o[j] * rr) * norm_w[j]) * (zz / (one + np.float32(math.exp(-zz))))


@njit(cache=True, boundscheck=False, nogil=True)
def _member(m, nm, ctr, mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk,
            y, q, k, out):
    """Member m of a crew of nm (kernels/team_cpu.py): the conv's channel spans (stage 0),
    the norms' position spans (stage 1), the v heads (stage 2), each stage's pieces taken
    from its counter and waited for as a whole before the next. A piece's bytes depend on
    the piece alone, so any crew (one member included) gives the same bytes."""
    n, C = mix.shape
    nv, dk, _ = state.shape
    P0 = (C + CONV_SPAN - 1) // CONV_SPAN
    p = next_piece(ctr, 0)
    while p < P0:
        _conv(mix, conv_w, window, y, p * CONV_SPAN, min(C, (p + 1) * CONV_SPAN))
        finish(ctr, 0)
        p = next_piece(ctr, 0)
    wait(ctr, 0, P0)
    P1 = (n + NORM_SPAN - 1) // NORM_SPAN
    p = next_piece(ctr, 1)
    while p < P1:
        _norms(y, nk, dk, q, k, p * NORM_SPAN, min(n, (p + 1) * NORM_SPAN))
        finish(ctr, 1)
        p = next_piece(ctr, 1)
    wait(ctr, 1, P1)
    p = next_piece(ctr, 2)
    while p < nv:
        _head(p, y, z, b, a, A_log, dt_bias, norm_w, eps, state, nk, q, k, out)
        finish(ctr, 2)
        p = next_piece(ctr, 2)
    wait(ctr, 2, nv)


_CREW = []


def chunk(mix, z, b, a, conv_w, A_log, dt_bias, norm_w, eps, window, state, nk: int):
    """kernels/gdn.chunk's contract, in numba: out [n, nv dv]; window and state in place
    (both must be C-contiguous float32 views of the stream's fixed part). A chunk of more
    than CREW_SERIAL state elements x positions runs as one crew round of numba's thread
    count (kernels/team_cpu.Crew: the conv by channels, the norms by positions, the
    recurrence by v heads); the same pieces on the caller alone below it: the same bytes."""
    import numba

    from kernels.team_cpu import WIDTH, Crew
    n, C = mix.shape
    nv, dk, dv = state.shape
    out = np.empty((n, nv * dv), np.float32)
    y = np.empty((n, C), np.float32)
    q = np.empty((n, nk, dk), np.float32)
    k = np.empty((n, nk, dk), np.float32)
    c = np.ascontiguousarray
    ctr = np.zeros((4, WIDTH), np.int64)                 # three stages, the abort row
    args = (ctr, c(mix, np.float32), c(z, np.float32), c(b, np.float32), c(a, np.float32),
            conv_w, A_log, dt_bias, norm_w, np.float32(eps), window, state, nk, y, q, k, out)
    nm = min(numba.get_num_threads(), 16)
    if nm == 1 or n * nv * dk * dv <= CREW_SERIAL:
        _member(0, 1, *args)
        return out
    if not _CREW:
        _CREW.append(Crew(_member))
    _CREW[0].run(nm, args)
    return out
