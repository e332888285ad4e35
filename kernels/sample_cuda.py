"""On-device sampling: one launch draws a token for every sampled row of a round.

One block of NT = 1024 threads a row; the arithmetic and the order of every sum are those of
`kernels/sample.py` (read its docstring: that file is the definition, and the tests hold the
two equal token for token). Per row: temperature, top_k (0 = off), top_p (1 = off), min_p
(0 = off) and a counter-based uniform u = splitmix64-style hash of (request seed, seed salt,
the token's index in the reply), computed in the kernel: a row's token depends on its own
logits and those numbers only, never on the other rows of the launch.

Exact top-k/top-p without a sort: the row's logits are read again for each step of two
binary searches over the 32-bit order keys of the float32 logits (at most 32 steps each):
top-k counts tokens with key >= t (an integer block sum); top-p sums the float64 weights
exp(x/T - m) of the kept tokens with key >= t (a fixed-order block sum, so the same as the
reference's) and keeps the largest t whose mass still reaches top_p of the whole. Weights are
computed only for tokens at or above the probe, so the later probes cost one pass of reads.
Then one pass of kept weights a thread, an in-order scan of the 1024 thread sums and a walk of
one thread's tokens draws the token. Cost: up to ~66 reads of the row (128k x 4 bytes from L2).
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels import sample as ref_mod
from kernels.common_cuda import as_f32, csrc, kernel


def _d(f: float) -> str:
    return f"__longlong_as_double(0x{ref_mod.bits(f):016x}LL)"


_SRC = csrc("sample.cu")


def _source() -> str:
    C = ref_mod.EXP_C
    poly = "\n    ".join(f"p = __dadd_rn(__dmul_rn(p, r), {_d(C[n])});" for n in range(11, -1, -1))
    defs = {"EXP_FLOOR": _d(ref_mod.EXP_FLOOR), "INV_LN2": _d(ref_mod.INV_LN2),
            "LN2_HI": _d(ref_mod.LN2_HI), "LN2_LO": _d(ref_mod.LN2_LO), "C12": _d(C[12])}
    src = _SRC.replace("POLY", poly)
    head = "".join(f"#define {k} ({v})\n" for k, v in defs.items())
    return head + src


SRC = _source()


def cuda(logits, rows, temperature, top_k, top_p, min_p, seed, salt, step):
    """Tokens (cupy int32 [n]) for rows `rows` of logits [R, V] (cupy, float32 or bf16);
    the other arguments are host sequences, one value a row (seeds, salts, steps: ints in
    [0, 2^64)). Same signature and same tokens as `kernels.sample.ref`."""
    x = as_f32(logits)
    n = len(rows)
    out = cp.empty(n, dtype=cp.int32)
    if n == 0:
        return out
    M = (1 << 64) - 1
    ip = np.array([[int(r), max(int(k), 0), int(s) & M, int(a) & M, int(t) & M]
                   for r, k, s, a, t in zip(rows, top_k, seed, salt, step)], dtype=np.uint64)
    fp = np.array([[float(T), float(p), float(m)] for T, p, m in zip(temperature, top_p, min_p)],
                  dtype=np.float64)
    kernel(SRC, "sample_rows")((n,), (ref_mod.NT,),
                               (x, cp.int64(x.shape[1]), cp.asarray(ip), cp.asarray(fp), out))
    return out
