"""On-device sampling, numpy definition: what the CUDA form (`kernels/sample_cuda.py`,
kernels/csrc/sample.cu) draws, bit for bit, so the CPU can check it. The CPU engine does NOT
use this: its sampler stays `server/engine/sampler.py` (a numpy generator a stream).

Every row of a round goes through it, greedy or sampled. A row has float32 logits x [V] and:
  temperature T (T < MIN_TEMPERATURE: greedy), top_k K (0 = off), top_p P (1 = off), min_p M
  (0 = off), repetition / presence / frequency penalties, a list of adjusted tokens
  (id, count, flags, bias): count = times generated, flags bit 0 = seen (prompt or
  generated, for the repetition penalty), bit 1 = banned (eos before min_tokens); and an
  optional bitmask of allowed tokens (bit i%32 of word i/32; the grammar's), and a seed.

1. Shaping (float32, IEEE, in this order, the host sampler's arithmetic too):
   seen: y = y > 0 ? y / rep : y * rep; count > 0: y = y - (freq * count + pres);
   y = y + bias; banned or not allowed by the mask: y = -inf. Then y = y + 0 (-0 -> +0).
2. A row holding NaN or +inf gives token -2 (a numerical fault: the request ends); a row
   with no finite value gives -1 (nothing allowed). key(y) is the float's order as a uint32.
3. Greedy: the first index of the largest value. A `plain` greedy row (no shaping, no
   logprobs: the server's arg-max path) takes numpy's arg-max of the raw row before step 2
   (the first NaN wins), as kernels/argmax_cuda.py does.
4. m = max(y); w_i = expf_((y_i - m) / T) in float32 (`expf_`: range reduction by ln2 split
   hi/lo, a degree-7 Taylor polynomial by Horner, times 2^k from bits, 0 under -32); every
   step one IEEE float32 op, so both sides give the same bits. The top token weighs 1.
   min-p: w_i < M weighs 0. q_i = floor(w_i * 2^44) as an integer (so weights under 2^-44 of
   the top one weigh 0): every sum below is an exact integer sum, the same in any order.
5. top-k: tk = the K-th largest key (ties at it all kept); off: tk = 0.
6. top-p: S(t) = sum of q over keys >= t; tp = the largest t with double(S(t)) >= double(P) *
   double(S(tk)) and S(t) > 0 (S falls as t grows; the kernel finds t a byte of the key at a
   time from histograms). Off: tp = tk.
7. R = S(tp); r = ((h >> 11) * R) >> 53 (exact); the token is the first index i where the
   running sum, in index order, of q over keys >= tp exceeds r.

h = mix(mix(mix(seed) ^ salt) ^ step), `mix` = splitmix64's finaliser, mod 2^64: a
counter-based draw keyed by the request's seed, the server's salt and the token's index in
the reply. A row's token depends on its own inputs only, never on the other rows.
"""
from __future__ import annotations

import math
import struct

import numpy as np

MIN_TEMPERATURE = 1e-5         # server/engine/sampler.py's: under it a row is greedy
NT = 1024                      # threads a row on the device (kernels/csrc/sample.cu)
M64 = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15
LN2_HI = 0.693359375           # Cody & Waite's float split of ln 2: k * LN2_HI is exact
LN2_LO = -2.12194440e-4
INV_LN2 = 1.44269504088896341
EXP_C = tuple(1.0 / math.factorial(n) for n in range(8))
EXP_FLOOR = -32.0              # expf_(d) = 0 below: e^-32 < 2^-44, it would weigh 0 anyway
QBITS = 44                     # q = floor(w * 2^44): 2^20 tokens of weight 1 still fit in 64 bits
SEEN, BANNED = 1, 2
F32 = np.float32


def bits32(f: float) -> int:
    """The float32's bits, for writing constants into the CUDA source exactly."""
    return struct.unpack("<I", struct.pack("<f", f))[0]


def mix(z: int) -> int:
    z = (z + GAMMA) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def draw_hash(seed: int, salt: int, step: int) -> int:
    return mix(mix(mix(seed & M64) ^ (salt & M64)) ^ (step & M64))


def uniform(seed: int, salt: int, step: int) -> float:
    return float(draw_hash(seed, salt, step) >> 11) * 2.0 ** -53


def expf_(d: np.ndarray) -> np.ndarray:
    """float32 exp of d <= 0, one IEEE float32 operation a step."""
    d = np.asarray(d, dtype=F32)
    small = ~(d >= F32(EXP_FLOOR))                     # -inf and NaN too
    d = np.where(small, F32(0), d)
    k = np.rint(d * F32(INV_LN2))
    r = (d - k * F32(LN2_HI)) - k * F32(LN2_LO)
    p = np.full(d.shape, F32(EXP_C[7]), dtype=F32)
    for c in EXP_C[6::-1]:
        p = p * r + F32(c)
    scale = ((k.astype(np.int32) + 127) << 23).astype(np.int32).view(F32)
    return np.where(small, F32(0), p * scale).astype(F32)


def keys(x: np.ndarray) -> np.ndarray:
    u = np.asarray(x, dtype=F32).view(np.uint32).astype(np.int64)
    return np.where(u & 0x80000000, (~u) & 0xFFFFFFFF, u | 0x80000000)


def split_adj(a):
    """A row's adjusted tokens as (int32 [A, 3]: id, count, flags; float32 [A]: bias), from
    (id, count, flags, bias) rows or such a pair already."""
    if isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], np.ndarray):
        return a
    t = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    return t[:, :3].astype(np.int32), t[:, 3].astype(F32)


def shape(x, rep=1.0, pres=0.0, freq=0.0, adj=(), mask=None) -> np.ndarray:
    """Step 1: the shaped float32 logits. adj: (id, count, flags, bias) rows (or split_adj's
    pair), ids unique; mask: uint32 words (bit set = allowed) or None."""
    y = np.array(x, dtype=F32)
    V = y.size
    if mask is not None:
        w = np.asarray(mask, dtype=np.uint32)
        allowed = np.unpackbits(w.view(np.uint8), bitorder="little")[:V].astype(bool)
        allowed = np.concatenate([allowed, np.zeros(V - allowed.size, dtype=bool)])
    ai, ab = split_adj(adj)
    for (tid, cnt, flags), b in zip(ai.tolist(), ab.tolist()):
        if not 0 <= tid < V:
            continue
        v = F32(x[tid])
        if flags & SEEN:
            v = v / F32(rep) if v > 0 else v * F32(rep)
        if cnt > 0:
            v = v - (F32(freq) * F32(cnt) + F32(pres))
        v = F32(v + F32(b))
        if flags & BANNED:
            v = F32(-np.inf)
        y[tid] = v
    if mask is not None:
        y[~allowed] = -np.inf
    return y + F32(0)


def weights(y, T, min_p) -> np.ndarray:
    """Step 4: q [V] uint64 of shaped finite-or--inf logits y."""
    m = y.max()
    with np.errstate(invalid="ignore", over="ignore"):
        d = (y - m) / F32(T)
    w = expf_(d)
    M = F32(min(max(float(min_p), 0.0), 1.0))
    w = np.where(w >= M, w, F32(0))
    return np.floor(w.astype(np.float64) * 2.0 ** QBITS).astype(np.uint64)


def row(y, T, K, P, M, h, plain=False):
    """-> (token, mask [V] of the tokens it could have drawn) for shaped logits y. plain (a
    greedy row nothing shapes): numpy's arg-max, the first NaN winning, no fault codes."""
    y = np.asarray(y, dtype=F32) + F32(0)
    V = y.size
    greedy = not F32(T) >= F32(MIN_TEMPERATURE)       # the kernel's test, in float32
    if greedy and plain:
        t = int(np.argmax(y))
        return t, np.arange(V) == t
    if np.isnan(y).any() or np.isposinf(y).any():
        return -2, np.zeros(V, dtype=bool)
    if not np.isfinite(y).any():
        return -1, np.zeros(V, dtype=bool)
    k = keys(y)
    if greedy:
        t = int(np.argmax(k))
        one = np.zeros(V, dtype=bool)
        one[t] = True
        return t, one
    q = weights(y, T, M)
    K = int(K)
    tk = int(np.sort(k)[-K]) if 0 < K < V else 0

    def S(t):
        return int(q[k >= t].sum(dtype=np.uint64))
    tp = tk
    if float(P) < 1.0:
        target = float(P) * float(S(tk))
        uk = np.unique(k[k >= tk])[::-1]                 # candidate thresholds, largest first
        order = np.argsort(-k, kind="stable")
        ks, cs = k[order], np.cumsum(q[order], dtype=np.uint64)
        last = np.searchsorted(-ks, -uk, side="right") - 1   # S(u) = cs at the last key >= u
        Su = cs[last]
        ok = (Su.astype(np.float64) >= target) & (Su > 0)
        tp = int(uk[int(np.argmax(ok))])                 # ok is false, then true as u falls
    kept = (k >= tp) & (q > 0)
    e = np.where(kept, q, np.uint64(0))
    R = int(e.sum(dtype=np.uint64))
    r = ((h >> 11) * R) >> 53
    cum = np.cumsum(e, dtype=np.uint64)
    return int(np.searchsorted(cum, np.uint64(r), side="right")), kept


def ref(logits, rows, temperature, top_k, top_p, min_p, seed, salt, step, *,
        rep=None, pres=None, freq=None, adj=None, mask=None, plain=None) -> np.ndarray:
    """Tokens [n] int32 for rows `rows` of logits [R, V]; the other arguments are per row
    (seeds, salts and steps as ints in [0, 2^64); adj a tuple of (id, count, flags, bias)
    and mask uint32 words or None a row)."""
    logits = np.asarray(logits, dtype=F32)
    n = len(rows)
    rep, pres, freq = rep or [1.0] * n, pres or [0.0] * n, freq or [0.0] * n
    adj, mask, plain = adj or [()] * n, mask or [None] * n, plain or [False] * n
    out = np.empty(n, dtype=np.int32)
    for i, r in enumerate(rows):
        y = shape(logits[int(r)], rep[i], pres[i], freq[i], adj[i], mask[i])
        h = draw_hash(int(seed[i]), int(salt[i]), int(step[i]))
        out[i] = row(y, temperature[i], top_k[i], top_p[i], min_p[i], h, plain[i])[0]
    return out
