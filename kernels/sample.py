"""On-device sampling, numpy reference: the same arithmetic, bit for bit, as the CUDA form
(`kernels/sample_cuda.py`), so the CPU can check it. The CPU engine does NOT use this: its
sampler stays `server/engine/sampler.py`. This file defines what the GPU draws.

A row is sampled from float32 logits x [V] with temperature T > 0, top_k K (0 = off),
top_p P (1 = off), min_p M (0 = off) and one uniform number u:

1. x is sanitised: -0 -> +0, NaN -> -inf, +inf -> FLT_MAX. key(x) is the float's order as a
   uint32 (larger float, larger key). A row with no finite logit gives token 0.
2. m = max(x) / T and w_i = exp_(x_i / T - m) in float64 (so the top token weighs exactly
   1). `exp_` is our own: range reduction by ln2 (split hi/lo), a degree-12 Taylor polynomial
   by Horner, times 2^k built from bits, 0 under -700; every operation is one IEEE float64
   op (CUDA: __dmul_rn/__dadd_rn, no contraction), so both sides give the same bits.
3. top-k: tk = the K-th largest key (binary search over the 32-bit key space for the
   largest t with count(key >= t) >= K); kept: key >= tk (ties at the K-th value all kept,
   as the host sampler does).
4. min-p: kept also needs w >= M (M = min_p x the top weight, which is 1).
5. top-p: S(t) = the sum of w over kept tokens with key >= t, added in a FIXED order (below).
   tp = the largest t >= tk with S(t) >= P x S(tk) and S(t) > 0 (S is monotone in t, so a
   binary search over the key space finds it). Kept: key >= tp. That is the smallest set of
   top tokens whose mass reaches P of the mass, ties at the boundary all kept.
6. Draw: R = the kept mass, target = u x R, the token where the running sum of kept weights
   (in the fixed order) first exceeds target.

The fixed order (NT = 1024 threads a row): thread t owns tokens t, t + NT, t + 2NT, ... and
adds its kept weights in that order (acc_t); a sum over the row is the butterfly of
`__shfl_xor_sync` within each warp of 32, then the same butterfly over the 32 warp sums. The
draw scans acc_0..acc_1023 in order (inclusive sums), takes the first thread whose sum
exceeds target (else the last whose sum grew) and walks its tokens in order from the sum before it
(else its last token with mass). So the drawn token is a deterministic function of
(x, T, K, P, M, u): it depends on no other row.

u = (h >> 11) x 2^-53 with h = mix(mix(mix(seed) ^ salt) ^ step), `mix` = splitmix64's
finaliser (state + golden gamma, two xor-shift-multiplies), all mod 2^64: a counter-based
draw, keyed by the request's seed, the server's seed salt and the token's index in the reply.
"""
from __future__ import annotations

import math
import struct

import numpy as np

NT = 1024                      # threads a row (32 warps of 32): fixes the order of the sums
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
LN2_HI = 6.93147180369123816490e-01      # fdlibm's split of ln 2: k * LN2_HI is exact
LN2_LO = 1.90821492927058770002e-10
INV_LN2 = 1.44269504088896338700e+00
EXP_C = tuple(1.0 / math.factorial(n) for n in range(13))
EXP_FLOOR = -700.0             # exp_(d) = 0 below: 2^k stays normal, so x 2^k is exact
FLT_MAX = float(np.finfo(np.float32).max)


def bits(f: float) -> int:
    """The float64's bits, for writing constants into the CUDA source exactly."""
    return struct.unpack("<Q", struct.pack("<d", f))[0]


def mix(z: int) -> int:
    z = (z + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def uniform(seed: int, salt: int, step: int) -> float:
    h = mix(mix(mix(seed & M64) ^ (salt & M64)) ^ (step & M64))
    return float(h >> 11) * 2.0 ** -53


def exp_(d: np.ndarray) -> np.ndarray:
    d = np.asarray(d, dtype=np.float64)
    small = ~(d >= EXP_FLOOR)                         # -inf and NaN too
    d = np.where(small, 0.0, d)
    k = np.rint(d * INV_LN2)
    r = (d - k * LN2_HI) - k * LN2_LO
    p = np.full(d.shape, EXP_C[12])
    for c in EXP_C[11::-1]:
        p = p * r + c
    scale = ((k.astype(np.int64) + 1023) << 52).view(np.float64)
    return np.where(small, 0.0, p * scale)


def sanitise(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32) + np.float32(0.0)
    x = np.where(np.isnan(x), np.float32(-np.inf), x)
    return np.where(x == np.inf, np.float32(FLT_MAX), x).astype(np.float32)


def keys(x: np.ndarray) -> np.ndarray:
    u = x.view(np.uint32).astype(np.int64)
    return np.where(u & 0x80000000, (~u) & 0xFFFFFFFF, u | 0x80000000)


def _lanes_sum(a: np.ndarray) -> np.ndarray:
    """The __shfl_xor_sync butterfly over the last axis (32): every lane ends equal."""
    lane = np.arange(32)
    for o in (16, 8, 4, 2, 1):
        a = a + a[..., lane ^ o]
    return a[..., 0]


def _thread_sums(v: np.ndarray) -> np.ndarray:
    """acc_t = v[t] + v[t + NT] + ... in that order; v is padded to C x NT."""
    rows = v.reshape(-1, NT)
    acc = np.zeros(NT)
    for j in range(rows.shape[0]):
        acc = acc + rows[j]
    return acc


def block_sum(v: np.ndarray) -> float:
    return float(_lanes_sum(_lanes_sum(_thread_sums(v).reshape(32, 32))))


def _largest(lo: int, hi: int, ok) -> int:
    """The largest t in [lo, hi] with ok(t), given ok(lo) and ok monotone (true, then false)."""
    while lo < hi:
        mid = lo + (hi - lo + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def row(x, temperature: float, top_k: int, top_p: float, min_p: float, u: float):
    """-> (token, mask [V] of the tokens it could have drawn: kept, weight > 0)."""
    V = int(np.asarray(x).shape[-1])
    C = -(-V // NT)
    xs = np.full(C * NT, -np.inf, dtype=np.float32)
    xs[:V] = sanitise(x)
    valid = np.zeros(C * NT, dtype=bool)
    valid[:V] = True
    mx = xs.max()
    if mx == -np.inf:
        return 0, np.zeros(V, dtype=bool)
    T = float(temperature)
    m = float(np.float64(mx) / T)
    w = exp_(xs.astype(np.float64) / T - m)
    w[~valid] = 0.0
    k = np.where(valid, keys(xs), -1)
    kmax = int(keys(np.array([mx], dtype=np.float32))[0])
    tk = 0
    K = int(top_k)
    if 0 < K < V:
        tk = _largest(0, kmax, lambda t: int((k >= t).sum()) >= K)
    Mp = min(max(float(min_p), 0.0), 1.0)
    kept0 = valid & (k >= tk) & (w >= Mp)

    def S(t):
        return block_sum(np.where(kept0 & (k >= t), w, 0.0))
    tp = tk
    if float(top_p) < 1.0:
        target = float(top_p) * S(tk)
        tp = _largest(tk, kmax, lambda t: (s := S(t)) >= target and s > 0)
    kept = kept0 & (k >= tp)
    acc = _thread_sums(np.where(kept, w, 0.0))
    incl, c = [], 0.0
    for a in acc.tolist():
        c += a
        incl.append(c)
    target = u * incl[-1]
    j = next((t for t in range(NT) if incl[t] > target), None)
    if j is None:                                     # u x R rounded up to R: the last with mass
        j = max(t for t in range(NT) if incl[t] > (incl[t - 1] if t else 0.0))
    c = incl[j - 1] if j > 0 else 0.0
    last = -1
    for i in range(j, C * NT, NT):
        if kept[i] and w[i] > 0:
            last = i
            c += float(w[i])
            if c > target:
                return i, (kept & (w > 0))[:V]
    return last, (kept & (w > 0))[:V]


def ref(logits, rows, temperature, top_k, top_p, min_p, seed, salt, step) -> np.ndarray:
    """Tokens [n] int32 for rows `rows` of logits [R, V]; the other arguments are per row
    (seeds, salts and steps as ints in [0, 2^64))."""
    logits = np.asarray(logits, dtype=np.float32)
    out = np.empty(len(rows), dtype=np.int32)
    for n, r in enumerate(rows):
        u = uniform(int(seed[n]), int(salt[n]), int(step[n]))
        out[n] = row(logits[int(r)], temperature[n], top_k[n], top_p[n], min_p[n], u)[0]
    return out
