"""Q4_K and Q6_K quantizers in numpy, a port of ggml's reference ones (ggml/src/ggml-quants.c:
quantize_row_q4_K_ref with make_qkx2_quants, quantize_row_q6_K_ref with make_qx_quants), which
llama-quantize runs for these types without an importance matrix; gguf-py quantizes neither.

Contract: quantize_q4_k(x) / quantize_q6_k(x) of a float32 array whose last axis is a multiple of
256 give the bytes llama-quantize writes for it (block_q4_K: d, dmin, scales[12], qs[128] = 144
bytes; block_q6_K: ql[128], qh[64], scales[16], d = 210 bytes per 256 values), shape
(..., n // 256 * nbytes), uint8. Every float operation is float32 in the C source's order (its
sums sequential, no fused multiply-add: ggml-base is built for baseline x86-64 there), vectorised
across blocks only; fp16 conversions round to nearest even as ggml's software path does.
Checked byte for byte against llama-quantize by tools/refs/record_moe_q4km.py (the record's
q4_k_m.llama_quantize)."""
from __future__ import annotations

import numpy as np

QK_K = 256
GROUP_MAX_EPS = np.float32(1e-15)
F = np.float32


def nearest_int(v: np.ndarray) -> np.ndarray:
    """ggml's nearest_int (fval + 12582912.f, read as int): round half to even, |v| < 2**22."""
    return np.rint(v.astype(np.float32)).astype(np.int32)


def _f16_round(v: np.ndarray) -> np.ndarray:
    return v.astype(np.float16)


def _seqsum(a: np.ndarray) -> np.ndarray:
    """Sum over axis 0 in index order, float32 after every add (C's `s += a[i]` from 0)."""
    s = a[0].copy()
    for i in range(1, a.shape[0]):
        s += a[i]
    return s


def _make_qkx2(x: np.ndarray, w: np.ndarray, nmax: int, rmin: float, rdelta: float, nstep: int):
    """make_qkx2_quants over the columns of x (n = x.shape[0] values per column; columns are
    sub-blocks), use_mad false: (scale, the_min, L)."""
    mn = x.min(axis=0)
    mx = x.max(axis=0)
    sum_w = _seqsum(w)
    sum_x = _seqsum(w * x)
    mn = np.where(mn > 0, F(0), mn)
    flat = mx == mn
    mn0 = mn.copy()
    span = np.where(flat, F(1), mx - mn)
    iscale = F(nmax) / span
    scale = F(1) / iscale
    L = np.clip(nearest_int(iscale * (x - mn)), 0, nmax)
    d = scale * L.astype(np.float32) + mn - x
    best = _seqsum(w * (d * d))
    for s in range(nstep + 1):
        # max - min with the min of the best fit so far, as the C source's loop reads it
        span = np.where(flat, F(1), mx - mn)
        isc = (F(rmin) + F(rdelta) * F(s) + F(nmax)) / span
        La = np.clip(nearest_int(isc * (x - mn)), 0, nmax)
        Laf = La.astype(np.float32)
        wl = w * Laf
        sl = _seqsum(wl)
        sl2 = _seqsum(wl * Laf)
        sxl = _seqsum(wl * x)
        D = sum_w * sl2 - sl * sl
        ok = D > 0
        Ds = np.where(ok, D, F(1))
        t_scale = (sum_w * sxl - sum_x * sl) / Ds
        t_min = (sl2 * sum_x - sl * sxl) / Ds
        pos = t_min > 0
        t_scale = np.where(pos, sxl / np.where(sl2 != 0, sl2, F(1)), t_scale)
        t_min = np.where(pos, F(0), t_min)
        d = t_scale * Laf + t_min - x
        cur = _seqsum(w * (d * d))
        take = ok & (cur < best)
        L = np.where(take, La, L)
        best = np.where(take, cur, best)
        scale = np.where(take, t_scale, scale)
        mn = np.where(take, t_min, mn)
    scale = np.where(flat, F(0), scale)
    mn = np.where(flat, mn0, mn)
    L = np.where(flat, 0, L)
    return scale.astype(np.float32), (-mn).astype(np.float32), L


CHUNK = 512      # super-blocks a pass: the work arrays stay in cache (each block is independent)


def _chunked(fn, xb: np.ndarray, nbytes: int) -> np.ndarray:
    out = np.empty((xb.shape[0], nbytes), np.uint8)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        for i in range(0, xb.shape[0], CHUNK):
            out[i:i + CHUNK] = fn(xb[i:i + CHUNK])
    return out


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    lead, k = x.shape[:-1], x.shape[-1]
    assert k % QK_K == 0, f"quantize_q4_k: rows of {k}, not a multiple of {QK_K}"
    return _chunked(_q4_k, x.reshape(-1, QK_K), 144).reshape(*lead, k // QK_K * 144)


def _q4_k(xb: np.ndarray) -> np.ndarray:
    nb = xb.shape[0]
    xs = np.ascontiguousarray(xb.reshape(nb * 8, 32).T)       # [value in sub-block, sub-block]
    av = np.sqrt(_seqsum(xs * xs) / F(32))
    w = av + np.abs(xs)
    scales, mins, Lq = _make_qkx2(xs, w, 15, -1.0, 0.1, 20)
    Lq = Lq.T
    scales, mins = scales.reshape(nb, 8), mins.reshape(nb, 8)
    max_scale = np.zeros(nb, np.float32)
    max_min = np.zeros(nb, np.float32)
    for j in range(8):
        max_scale = np.where(scales[:, j] > max_scale, scales[:, j], max_scale)
        max_min = np.where(mins[:, j] > max_min, mins[:, j], max_min)
    inv_scale = np.where(max_scale > 0, F(63) / np.where(max_scale > 0, max_scale, F(1)), F(0))
    inv_min = np.where(max_min > 0, F(63) / np.where(max_min > 0, max_min, F(1)), F(0))
    # uint8 ls = nearest_int(...): the int's low byte, then MIN(63, ls)
    ls = np.minimum(nearest_int(inv_scale[:, None] * scales) & 0xFF, 63).astype(np.uint8)
    lm = np.minimum(nearest_int(inv_min[:, None] * mins) & 0xFF, 63).astype(np.uint8)
    sc = np.zeros((nb, 12), np.uint8)
    sc[:, 0:4] = ls[:, 0:4]
    sc[:, 4:8] = lm[:, 0:4]
    sc[:, 8:12] = (ls[:, 4:8] & 0xF) | ((lm[:, 4:8] & 0xF) << 4)
    sc[:, 0:4] |= (ls[:, 4:8] >> 4) << 6
    sc[:, 4:8] |= (lm[:, 4:8] >> 4) << 6
    d16 = _f16_round(max_scale / F(63))
    dm16 = _f16_round(max_min / F(63))
    d = d16.astype(np.float32)[:, None] * ls.astype(np.float32)     # get_scale_min_k4 gives ls, lm back
    dm = dm16.astype(np.float32)[:, None] * lm.astype(np.float32)
    x3 = xb.reshape(nb, 8, 32)
    dz = d == 0
    L = np.clip(nearest_int((x3 + dm[:, :, None]) / np.where(dz, F(1), d)[:, :, None]), 0, 15)
    # `if (!d) continue`: L keeps what make_qkx2_quants left there
    L = np.where(dz[:, :, None], Lq.reshape(nb, 8, 32), L)
    L = L.reshape(nb, 4, 2, 32).astype(np.uint8)
    qs = (L[:, :, 0, :] | (L[:, :, 1, :] << 4)).reshape(nb, 128)
    out = np.empty((nb, 144), np.uint8)
    out[:, 0:2] = d16.view(np.uint8).reshape(nb, 2)
    out[:, 2:4] = dm16.view(np.uint8).reshape(nb, 2)
    out[:, 4:16] = sc
    out[:, 16:144] = qs
    return out


def _make_qx_rmse1(x: np.ndarray, nmax: int):
    """make_qx_quants(n, nmax, x, L, rmse_type=1, qw=NULL) over the columns of x: the scale."""
    amax = np.abs(x).max(axis=0)
    mx = x[np.abs(x).argmax(axis=0), np.arange(x.shape[1])]   # the first of the largest |x|
    zero = amax < GROUP_MAX_EPS
    mxs = np.where(zero, F(1), mx)
    w = x * x
    wx = w * x

    def sums(iscale):
        l = np.clip(nearest_int(iscale * x), -nmax, nmax - 1).astype(np.float32)
        return _seqsum(wx * l), _seqsum((w * l) * l)

    iscale = F(-nmax) / mxs
    slx, sl2 = sums(iscale)
    scale = np.where(sl2 != 0, slx / np.where(sl2 != 0, sl2, F(1)), F(0))
    best = scale * slx
    for s in range(-9, 10):
        if s == 0:
            continue
        isc = -(F(nmax) + F(0.1) * F(s)) / mxs
        slx, sl2 = sums(isc)
        take = (sl2 > 0) & (slx * slx > best * sl2)
        sc_new = slx / np.where(sl2 > 0, sl2, F(1))
        scale = np.where(take, sc_new, scale)
        best = np.where(take, sc_new * slx, best)
    return np.where(zero, F(0), scale).astype(np.float32)


def quantize_q6_k(x: np.ndarray) -> np.ndarray:
    x = np.ascontiguousarray(x, dtype=np.float32)
    lead, k = x.shape[:-1], x.shape[-1]
    assert k % QK_K == 0, f"quantize_q6_k: rows of {k}, not a multiple of {QK_K}"
    return _chunked(_q6_k, x.reshape(-1, QK_K), 210).reshape(*lead, k // QK_K * 210)


def _q6_k(xb: np.ndarray) -> np.ndarray:
    nb = xb.shape[0]
    scales = _make_qx_rmse1(np.ascontiguousarray(xb.reshape(nb * 16, 16).T), 32).reshape(nb, 16)
    max_abs = np.zeros(nb, np.float32)
    max_scale = np.zeros(nb, np.float32)
    for j in range(16):
        a = np.abs(scales[:, j])
        gt = a > max_abs
        max_abs = np.where(gt, a, max_abs)
        max_scale = np.where(gt, scales[:, j], max_scale)
    zero = max_abs < GROUP_MAX_EPS
    iscale = F(-128) / np.where(zero, F(1), max_scale)
    d16 = _f16_round(F(1) / iscale)
    sc = np.minimum(127, nearest_int(iscale[:, None] * scales)).astype(np.int8)
    d = d16.astype(np.float32)[:, None] * sc.astype(np.float32)
    x3 = xb.reshape(nb, 16, 16)
    dz = d == 0
    L = np.clip(nearest_int(x3 / np.where(dz, F(1), d)[:, :, None]), -32, 31) + 32
    if dz.any():   # `if (!d) continue`: L keeps make_qx_quants' levels there
        Lq = _make_qx_levels(xb.reshape(nb * 16, 16), 32).reshape(nb, 16, 16)
        L = np.where(dz[:, :, None], Lq, L)
    L = L.reshape(nb, 2, 4, 32).astype(np.uint8)          # [half][quarter][l]
    ql = np.empty((nb, 2, 64), np.uint8)
    ql[:, :, 0:32] = (L[:, :, 0] & 0xF) | ((L[:, :, 2] & 0xF) << 4)
    ql[:, :, 32:64] = (L[:, :, 1] & 0xF) | ((L[:, :, 3] & 0xF) << 4)
    qh = (L[:, :, 0] >> 4) | ((L[:, :, 1] >> 4) << 2) | ((L[:, :, 2] >> 4) << 4) | ((L[:, :, 3] >> 4) << 6)
    out = np.empty((nb, 210), np.uint8)
    out[:, 0:128] = ql.reshape(nb, 128)
    out[:, 128:192] = qh.reshape(nb, 64)
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = d16.view(np.uint8).reshape(nb, 2)
    out[zero] = 0                                          # memset, d = 0
    return out


def _make_qx_levels(x: np.ndarray, nmax: int) -> np.ndarray:
    """The L (0..2*nmax-1) make_qx_quants(rmse_type 1) leaves; only needed where a sub-block's
    stored scale rounds to 0."""
    out = np.empty(x.shape, np.int32)
    for r in range(x.shape[0]):
        out[r] = _qx_levels_row(x[r], nmax)
    return out


def _qx_levels_row(x: np.ndarray, nmax: int) -> np.ndarray:
    n = len(x)
    amax, mx = F(0), F(0)
    for v in x:
        if abs(v) > amax:
            amax, mx = F(abs(v)), F(v)
    if amax < GROUP_MAX_EPS:
        return np.zeros(n, np.int32)
    iscale = F(-nmax) / mx
    L = np.clip(nearest_int(iscale * x), -nmax, nmax - 1) + nmax
    slx = sl2 = F(0)
    for i in range(n):
        l = F(int(np.clip(nearest_int(iscale * x[i]), -nmax, nmax - 1)))
        w = F(x[i] * x[i])
        slx = F(slx + F(F(w * x[i]) * l)); sl2 = F(sl2 + F(F(w * l) * l))
    scale = F(slx / sl2) if sl2 else F(0)
    best = F(scale * slx)
    for s in range(-9, 10):
        if s == 0:
            continue
        isc = F(-(F(nmax) + F(F(0.1) * F(s))) / mx)
        slx = sl2 = F(0)
        for i in range(n):
            l = F(int(np.clip(nearest_int(isc * x[i]), -nmax, nmax - 1)))
            w = F(x[i] * x[i])
            slx = F(slx + F(F(w * x[i]) * l)); sl2 = F(sl2 + F(F(w * l) * l))
        if sl2 > 0 and F(slx * slx) > F(best * sl2):
            L = np.clip(nearest_int(isc * x), -nmax, nmax - 1) + nmax
            scale = F(slx / sl2); best = F(scale * slx)
    return L
