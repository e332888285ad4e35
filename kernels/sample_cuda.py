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
from kernels.common_cuda import as_f32, kernel


def _d(f: float) -> str:
    return f"__longlong_as_double(0x{ref_mod.bits(f):016x}LL)"


_SRC = r"""
#define NT 1024
#define FLT_MAX_ __int_as_float(0x7f7fffff)
#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ double exp_(double d) {
    if (!(d >= EXP_FLOOR)) return 0.0;
    const long long ki = __double2ll_rn(__dmul_rn(d, INV_LN2));   // nearest, ties to even
    const double k = (double)ki;
    const double r = __dsub_rn(__dsub_rn(d, __dmul_rn(k, LN2_HI)), __dmul_rn(k, LN2_LO));
    double p = C12;
    POLY
    const double s = __longlong_as_double((ki + 1023) << 52);
    return __dmul_rn(p, s);
}
__device__ __forceinline__ float san(float x) {
    x = __fadd_rn(x, 0.0f);
    if (x != x) return NEG_INF;
    if (x == POS_INF) return FLT_MAX_;
    return x;
}
__device__ __forceinline__ unsigned key(float x) {
    const unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// the butterfly within each warp, then over the 32 warp sums: every thread gets the same bits
__device__ double bsum(double v, double* ws) {
    for (int o = 16; o; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(FULL, v, o));
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = ws[threadIdx.x & 31];
    for (int o = 16; o; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(FULL, v, o));
    __syncthreads();
    return v;
}
__device__ long long bcount(long long v, long long* ws) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = ws[threadIdx.x & 31];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    __syncthreads();
    return v;
}
__device__ float bmax(float v, float* ws) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = warp_max(ws[threadIdx.x & 31]);
    __syncthreads();
    return v;
}

// ip [n, 5] uint64: row, top_k, seed, salt, step; fp [n, 3] float64: temperature, top_p, min_p
extern "C" __global__ void __launch_bounds__(NT)
sample_rows(const float* logits, long long V, const unsigned long long* ip, const double* fp,
            int* out) {
    __shared__ double ws[32];
    __shared__ long long wc[32];
    __shared__ float wf[32];
    __shared__ double acc_s[NT];
    const int tid = threadIdx.x;
    const unsigned long long* q = ip + 5 * (long long)blockIdx.x;
    const double* f = fp + 3 * (long long)blockIdx.x;
    const float* x = logits + (long long)q[0] * V;
    const long long K = (long long)q[1];
    const double T = f[0], P = f[1];
    const double Mp = f[2] > 1.0 ? 1.0 : (f[2] > 0.0 ? f[2] : 0.0);

    float mx = NEG_INF;
    for (long long i = tid; i < V; i += NT) mx = fmaxf(mx, san(x[i]));
    mx = bmax(mx, wf);
    if (mx == NEG_INF) { if (tid == 0) out[blockIdx.x] = 0; return; }
    const double m = __ddiv_rn((double)mx, T);
    const unsigned kmax = key(mx);

    unsigned long long lo = 0, hi = kmax;             // top-k: the K-th largest key
    if (K > 0 && K < V) {
        while (lo < hi) {
            const unsigned long long mid = lo + (hi - lo + 1) / 2;
            long long c = 0;
            for (long long i = tid; i < V; i += NT) c += key(san(x[i])) >= mid;
            if (bcount(c, wc) >= K) lo = mid; else hi = mid - 1;
        }
    }
    const unsigned long long tk = lo;

    unsigned long long tp = tk;                       // top-p: the largest t with S(t) >= P S(tk)
    if (P < 1.0) {
        double target = 0.0;
        unsigned long long t = tk;
        lo = tk; hi = kmax;
        bool first = true;
        while (true) {
            if (!first) { if (lo >= hi) break; t = lo + (hi - lo + 1) / 2; }
            double a = 0.0;
            for (long long i = tid; i < V; i += NT) {
                const float xi = san(x[i]);
                const unsigned k = key(xi);
                if (k >= t && k >= tk) {
                    const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
                    if (w >= Mp) a = __dadd_rn(a, w);
                }
            }
            const double s = bsum(a, ws);
            if (first) { target = __dmul_rn(P, s); first = false; continue; }
            if (s >= target && s > 0.0) lo = t; else hi = t - 1;
        }
        tp = lo;
    }

    double a = 0.0;                                   // the draw
    for (long long i = tid; i < V; i += NT) {
        const float xi = san(x[i]);
        const unsigned k = key(xi);
        if (k >= tp) {
            const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
            if (w >= Mp) a = __dadd_rn(a, w);
        }
    }
    acc_s[tid] = a;
    __syncthreads();
    if (tid != 0) return;
    double c = 0.0;
    for (int t = 0; t < NT; t++) { c = __dadd_rn(c, acc_s[t]); acc_s[t] = c; }
    const unsigned long long h = mix(mix(mix(q[2]) ^ q[3]) ^ q[4]);
    const double u = __dmul_rn((double)(h >> 11), __longlong_as_double(0x3CA0000000000000LL));
    const double target = __dmul_rn(u, c);
    int j = -1;
    for (int t = 0; t < NT; t++) if (acc_s[t] > target) { j = t; break; }
    if (j < 0)
        for (int t = NT - 1; t >= 0; t--)
            if (acc_s[t] > (t ? acc_s[t - 1] : 0.0)) { j = t; break; }
    if (j < 0) j = 0;                                 // no mass at all: cannot happen (top weighs 1)
    c = j > 0 ? acc_s[j - 1] : 0.0;
    long long last = -1;
    for (long long i = j; i < V; i += NT) {
        const float xi = san(x[i]);
        if (key(xi) >= tp) {
            const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
            if (w >= Mp && w > 0.0) {
                last = i;
                c = __dadd_rn(c, w);
                if (c > target) break;
            }
        }
    }
    out[blockIdx.x] = (int)last;
}
"""


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
