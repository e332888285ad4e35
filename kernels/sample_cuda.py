"""On-device sampling: one launch picks the token of every row of a round, greedy or sampled.

One block of NT = 1024 threads a row (kernels/csrc/sample.cu); the arithmetic is that of
`kernels/sample.py` (read its docstring: that file is the definition, and the tests hold the
two equal token for token). Per row: penalties, logit bias, banned tokens and a grammar's
bitmask shape the logits (into a scratch row, only for rows that have any); then greedy (the
first arg-max) or temperature, top_k, top_p, min_p and a counter-based draw keyed by (request
seed, seed salt, the token's index in the reply), computed in the kernel: a row's token
depends on its own logits and inputs only, never on the other rows of the launch.

Exact top-k/top-p without a sort: weights are integers (floor(w * 2^44)), so every sum is
exact in any order; the thresholds are found a byte of the float's order key at a time from
shared-memory histograms of counts and masses (at most 4 passes each for top-k and top-p,
the later ones computing weights only for the tokens under the chosen prefix), and the draw
is one pass of warp sums and one warp's scan of its tokens. Plain sampling: 2 passes.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels import sample as ref_mod
from kernels.common_cuda import as_f32, csrc, kernel

NO_MASK = (1 << 64) - 1


def _f(v: float) -> str:
    return f"__int_as_float(0x{ref_mod.bits32(v):08x})"


_SRC = csrc("sample.cu")


def _source() -> str:
    C = ref_mod.EXP_C
    poly = "\n    ".join(f"p = __fadd_rn(__fmul_rn(p, r), {_f(C[n])});" for n in range(6, -1, -1))
    defs = {"EXP_FLOOR": _f(ref_mod.EXP_FLOOR), "INV_LN2": _f(ref_mod.INV_LN2),
            "LN2_HI": _f(ref_mod.LN2_HI), "LN2_LO": _f(ref_mod.LN2_LO), "C7": _f(C[7]),
            "MIN_T": _f(ref_mod.MIN_TEMPERATURE)}
    src = _SRC.replace("POLY", poly)
    head = "".join(f"#define {k} ({v})\n" for k, v in defs.items())
    return head + src


SRC = _source()
SMEM = 32 * 256 * (8 + 4)      # the 32 warps' histograms (kernels/csrc/sample.cu's dyn)


def pack(V, rows, temperature, top_k, top_p, min_p, seed, salt, step, rep=None, pres=None,
         freq=None, adj=None, mask=None, plain=None):
    """The launch's inputs as numpy arrays: ip [n, 8] uint64, fp [n, 8] float64, ai [A, 3]
    int32, ab [A] float32, mw [W] uint32 (see kernels/csrc/sample.cu)."""
    n = len(rows)
    M = (1 << 64) - 1
    rep, pres, freq = rep or [1.0] * n, pres or [0.0] * n, freq or [0.0] * n
    adj, mask, plain = adj or [()] * n, mask or [None] * n, plain or [False] * n
    ip = np.zeros((n, 8), dtype=np.uint64)
    ip[:, 0] = rows
    ip[:, 1] = [max(int(k), 0) for k in top_k]
    ip[:, 2] = [int(v) & M for v in seed]
    ip[:, 3] = [int(v) & M for v in salt]
    ip[:, 4] = [int(v) & M for v in step]
    ip[:, 7] = NO_MASK
    fp = np.zeros((n, 8), dtype=np.float64)
    fp[:, 0], fp[:, 1], fp[:, 2] = temperature, top_p, min_p
    fp[:, 3], fp[:, 4], fp[:, 5], fp[:, 6] = rep, pres, freq, plain
    ais, abs_, mws = [], [], []
    na = nw = 0
    words = -(-V // 32)
    for i in range(n):                                # only rows with adjustments or a mask
        if len(adj[i]):
            a, b = ref_mod.split_adj(adj[i])
            ais.append(a)
            abs_.append(b)
            ip[i, 5], ip[i, 6] = na, len(a)
            na += len(a)
        if mask[i] is not None:
            w = np.zeros(words, dtype=np.uint32)
            m = np.asarray(mask[i], dtype=np.uint32)[:words]
            w[:m.size] = m
            mws.append(w)
            ip[i, 7] = nw
            nw += words
    ai = np.concatenate(ais) if ais else np.zeros((1, 3), dtype=np.int32)
    ab = np.concatenate(abs_) if abs_ else np.zeros(1, dtype=np.float32)
    mw = np.concatenate(mws) if mws else np.zeros(1, dtype=np.uint32)
    return ip, fp, ai, ab, mw


def _upload(arrays):
    """One host->device copy of all the inputs (8-byte aligned sections of one buffer)."""
    offs, total = [], 0
    for a in arrays:
        offs.append(total)
        total += -(-a.nbytes // 8) * 8
    host = np.zeros(total, dtype=np.uint8)
    for a, o in zip(arrays, offs):
        host[o:o + a.nbytes] = np.ascontiguousarray(a).view(np.uint8).ravel()
    dev = cp.asarray(host)
    return [dev[o:o + a.nbytes].view(a.dtype) for a, o in zip(arrays, offs)]


def cuda(logits, rows, temperature, top_k, top_p, min_p, seed, salt, step, **shaping):
    """Tokens (cupy int32 [n]) for rows `rows` of logits [R, V] (cupy, float32 or bf16);
    the other arguments are host sequences, one value a row; shaping: rep, pres, freq, adj,
    mask as kernels.sample.ref takes them. Same tokens as `kernels.sample.ref`: -1 where no
    token is allowed, -2 where the shaped row holds NaN or +inf."""
    x = as_f32(logits)
    n = len(rows)
    out = cp.empty(n, dtype=cp.int32)
    if n == 0:
        return out
    V = int(x.shape[1])
    ip, fp, ai, ab, mw = pack(V, rows, temperature, top_k, top_p, min_p, seed, salt, step,
                              **shaping)
    shaped = int(((ip[:, 6] > 0) | (ip[:, 7] != NO_MASK)).any())
    dip, dfp, dai, dab, dmw = _upload([ip, fp, ai, ab, mw])
    scratch = cp.empty((n if shaped else 1, V), dtype=cp.float32)
    kernel(SRC, "sample_rows", smem=SMEM)((n,), (ref_mod.NT,),
                                          (x, np.int32(V), dip, dfp, dai, dab, dmw, scratch, out),
                                          shared_mem=SMEM)
    return out
