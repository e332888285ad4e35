"""x @ W^T on the GPU with tensor cores (mma.sync m16n8k16, bf16 operands, float32
accumulation and output): our own kernels, batch invariant by construction.

On the GPU the weights are [N, K] (out, in) and packed in mma fragment order (`Packed`:
a warp's load of one 32-k chunk of 8 columns is 512 contiguous bytes); x is [M, K] bf16
(float32 is rounded to bf16, nearest even, as it is loaded).

The arithmetic of one output element C[m, n] is fixed and depends on nothing but row m of
x, row n of W and K:
  * K is cut into chunks of 32 (a last partial chunk reads zeros past K), and the chunks
    into KSPLIT ranges: range q = chunks [q nch / KSPLIT, (q + 1) nch / KSPLIT);
  * within a chunk, lane t of a quad holds k = 8t .. 8t+7 of its row; the first mma takes
    k in {8t .. 8t+3 : t = 0..3}, the second {8t+4 .. 8t+7}: the same fixed permutation of k
    for x and W, so the product is x.W and the order is one and the same in every kernel;
  * a range's sum starts at 0 and each mma adds its 16 products (the hardware's order within
    one instruction is fixed), chunk after chunk;
  * C = ((((0 + range 0) + range 1) + ...) + range KSPLIT-1) + bias[n] (bf16 widened).
Three kernels run this arithmetic with different scheduling, chosen by shape only:
  * `stream` (up to 64 rows, STREAM_CFG: decode rounds): a block of KSPLIT warps owns NT
    groups of 8 columns and MT tiles of 16 rows; warp q streams range q's weights straight
    into registers (U chunks in flight), then the block folds the ranges from shared memory.
    Its variants change what is loaded or stored, never the sum: GLU_ (the gate|up GEMM
    writing SwiGLU, `cuda_glu`) and NORM_ (x = RMSNorm of the residual sum, made on load,
    `cuda_norm`); each gives the bytes of its unfused pair of kernels;
  * `tiled` (large M): 128 x 128 tiles through swizzled shared memory, cp.async in 3
    stages of 64 k; each warp sums a range in `acc` and folds it into `tot` at its end;
  * `split` (few tiles): the tiled kernel with one block per range writing its sum to a
    scratch buffer, then `fold_parts` folds them in order.
On sm_90 two more run it with wgmma: kernels/wgmma_tma_cuda.py (more than 64 rows: TMA, both
operands from shared memory) and kernels/wgmma_cuda.py (17..64 rows of wide GEMMs; shapes the
TMA kernel does not take).
Every row's bytes are the same in all three, whatever the other rows
(tests/gpu/test_kernels.py checks the kernels against each other, and rows alone against
rows among others). That is what makes solo == concurrent, resumed == fresh (decoded rows
== prefilled rows) and graph == eager hold for the GEMMs; cuBLAS picks its kernel (tiles,
split-K) from the shape, so its rows change with M (gpu-notes), and is not used for them.

`plain` is one cuBLAS GEMM (fastest at large M, NOT batch invariant): benchmarks only.
"""
from __future__ import annotations

import ctypes
import os

import cupy as cp
import numpy as np

from kernels.common_cuda import BF16, UNPI, as_bf16, as_f32, kernel, launch

INVARIANT = True       # False: plain cuBLAS (benchmarks: what invariance costs)
KEEP_PLAIN = False     # benchmarks: packed weights keep their [N, K] form for cuBLAS
# streaming kernel configurations by rows (scheduling only; bench/stream_sweep.py):
# (up to M rows, MT tiles of 16 rows, NT groups of 8 columns a block, U chunks in flight)
STREAM_CFG = [(16, 1, 1, 4), (64, 2, 4, 2)]
WGMMA = True           # sm_90: more than 64 rows through kernels/wgmma_tma_cuda.py (shapes it
                       # lacks: wgmma_cuda.py), 17..64 rows per WGMMA_SMALL (same bytes)
WGMMA_SMALL = (17, 96)  # from 17 rows (decode rounds), a GEMM of >= 96 wgmma blocks (tiles, or
                        # tiles x 8 K ranges then fold_parts) takes wgmma_cuda (same bytes); a
                        # gate|up of >= 96 tiles: wgmma_cuda then swiglu_cuda (the same bytes as
                        # the fused stream launch)
PF = os.environ.get("TF_STREAM_PF", "1") != "0"  # the streaming kernel loads round r + 1's
                       # weights before round r's arithmetic (llama3-8b's GEMMs at one row on the
                       # H200: 4.38 -> 4.21 ms; cuBLAS 4.08)
TMA_SMALL = os.environ.get("TF_TMA_SMALL", "0") == "1"   # 17..64 rows of wide GEMMs through
                       # kernels/wgmma_tma_cuda (whole tiles, or its split form); else wgmma_cuda.
                       # Off: at 64 rows the H200 measured 6.54-6.60 ms on, 6.42 off (same bytes)
SPLIT_BELOW = 100      # tiles (128 x 128) below which the tiled kernel splits K over blocks
KSPLIT = 8             # K ranges summed apart, then folded in order: ARITHMETIC (all kernels)
FUSE_NORM = True       # residual add + RMSNorm in the streaming GEMM's x load (cuda_norm) ..
NORM_WIDE = (16384, 1, 8, 1)  # (from N columns: MT, NT, U) of the norm-fused launch: 8 groups
                              # a block (bench/norm_head_sweep.py: smollm2's LM head 79 -> 22 us)
FUSE_NORM_MAX_K = 1024  # .. for rows up to this long: smollm2 (576) gains 0.05 ms a step, and
                        # llama3 (4096) loses 1.3 (every block recomputes a long row's norm)

_MMA = r"""
__device__ __forceinline__ void mma(float* d, unsigned a0, unsigned a1, unsigned a2,
                                    unsigned a3, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
"""

_SRC = _MMA + UNPI + r"""
// one chunk of 32 k: xl/xh = rows g and g+8 (k 8t .. 8t+7), w = column g (k 8t .. 8t+7)
__device__ __forceinline__ void chunk(float* d, const uint4& xl, const uint4& xh, const uint4& w) {
    mma(d, xl.x, xh.x, xl.y, xh.y, w.x, w.y);
    mma(d, xl.z, xh.z, xl.w, xh.w, w.z, w.w);
}
__device__ __forceinline__ unsigned pack(float lo, float hi) {
    return ((unsigned)f2b(hi) << 16) | (unsigned)f2b(lo);
}
// 8 consecutive k of one x row as bf16 pairs (zeros past M or K)
__device__ __forceinline__ uint4 xrow8(const XT* x, int m, int M, int k, int K) {
    if (m >= M || k >= K) return make_uint4(0, 0, 0, 0);
#if X_F32
    const float4 a = __ldg((const float4*)(x + (long long)m * K + k));
    const float4 b = __ldg((const float4*)(x + (long long)m * K + k + 4));
    return make_uint4(pack(a.x, a.y), pack(a.z, a.w), pack(b.x, b.y), pack(b.z, b.w));
#else
    return __ldg((const uint4*)(x + (long long)m * K + k));
#endif
}
#if NORM_
// NORM_: x row m is rmsnorm(xo + xr) (xr alone without xo) computed on load with the row's
// scale r from the prologue: rmsnorm_cuda's arithmetic (common_cuda rms_apply), then bf16
__device__ __forceinline__ uint4 xnorm8(const float* xo, const float* xr, const bf16* nwt,
                                        float r, int m, int M, int k, int K) {
    if (m >= M || k >= K) return make_uint4(0, 0, 0, 0);
    const long long o = (long long)m * K + k;
    float4 a = __ldg((const float4*)(xr + o)), b = __ldg((const float4*)(xr + o + 4));
    if (xo) {
        const float4 c = __ldg((const float4*)(xo + o)), d = __ldg((const float4*)(xo + o + 4));
        a = make_float4(__fadd_rn(c.x, a.x), __fadd_rn(c.y, a.y), __fadd_rn(c.z, a.z), __fadd_rn(c.w, a.w));
        b = make_float4(__fadd_rn(d.x, b.x), __fadd_rn(d.y, b.y), __fadd_rn(d.z, b.z), __fadd_rn(d.w, b.w));
    }
    const bf16* w = nwt + k;
    return make_uint4(pack(rms_apply(a.x, r, w[0]), rms_apply(a.y, r, w[1])),
                      pack(rms_apply(a.z, r, w[2]), rms_apply(a.w, r, w[3])),
                      pack(rms_apply(b.x, r, w[4]), rms_apply(b.y, r, w[5])),
                      pack(rms_apply(b.z, r, w[6]), rms_apply(b.w, r, w[7])));
}
#endif
__device__ __forceinline__ void store(float* C, const bf16* bias, int M, int N, int m, int n,
                                      float v0, float v1) {
    if (m >= M) return;
    if (n < N) C[(long long)m * N + n] = bias ? v0 + b2f(bias[n]) : v0;
    if (n + 1 < N) C[(long long)m * N + n + 1] = bias ? v1 + b2f(bias[n + 1]) : v1;
}

// K range q of S_: chunks [q nch / S_, (q + 1) nch / S_)
__device__ __forceinline__ int range_lo(int q, int nch) { return (int)((long long)q * nch / S_); }

// grid (ceil(N / (8 NT)), ceil(M / (16 MT))), 32 S_ threads, dynamic shared memory
// S_ MT NT 128 floats: warp q sums K range q of the block's NT groups of 8 columns for its
// MT tiles of 16 rows (the x fragments of a chunk are loaded once and used for all NT
// groups); the S_ partial sums are then folded in order 0, 1, .. from 0.f by all threads.
// GLU_: the gate|up GEMM with SwiGLU in the epilogue: N = 2F columns, gate then up; the
// block's first NT/2 groups are gate groups, the others the up groups F/8 further on, and
// it writes silu_mul(gate, up) as bf16 [M, F] (C is then a bf16 pointer).
__device__ __forceinline__ int group_of(int j, int n8) {
#if GLU_
    return j < NT / 2 ? blockIdx.x * (NT / 2) + j : n8 / 2 + blockIdx.x * (NT / 2) + j - NT / 2;
#else
    return blockIdx.x * NT + j;
#endif
}
__device__ __forceinline__ bool group_ok(int j, int n8) {
#if GLU_
    return blockIdx.x * (NT / 2) + (j % (NT / 2)) < n8 / 2;
#else
    return group_of(j, n8) < n8;
#endif
}

// NORM_ (MT == 1): x is the residual h [M, K] f32 and xo the sublayer output (or null): the
// block first finds each of its rows' RMSNorm scale in rmsnorm_cuda's order (its T threads
// emulated by the 8 warps), block x == 0 writes h + xo to hout, and x loads are normed.
extern "C" __global__ void __launch_bounds__(32 * S_) stream(
        const XT* x, const bf16* W, const bf16* bias, float* C, int M, int N, int K,
        const float* xo, const bf16* nwt, float* hout, float eps) {
    extern __shared__ float part[];                  // [S_][MT][NT][4][32]
    const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n8 = (N + 7) / 8, m0 = blockIdx.y * 16 * MT;
    const int KC = (K + 31) / 32;
    const bf16* wr = W + g * 8 + t * 2;              // Packed: word t of row g in each piece
    const int nch = KC, c_lo = range_lo(q, nch), c_hi = range_lo(q + 1, nch);
    uint4 w[U_][NT];                                 // every load of U_ chunks in flight at once
    auto load_w = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U_; u++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const bool ok = c0 + u < c_hi && group_ok(j, n8);
                const bf16* p = wr + (ok ? ((long long)group_of(j, n8) * KC + c0 + u) * 256 : 0);
                // four 32-bit loads, one a piece: each is one whole 128-byte line for the warp,
                // and lane (g, t) gets natural words 4t .. 4t+3 of row g (what `chunk` wants)
                const unsigned* pw = (const unsigned*)p;
                w[u][j] = ok ? make_uint4(__ldg(pw), __ldg(pw + 32), __ldg(pw + 64), __ldg(pw + 96))
                             : make_uint4(0, 0, 0, 0);
            }
    };
    pdl_trigger();
    load_w(c_lo);                   // the first weights in flight while the kernel before ends
    pdl_wait();                                      // nothing of x, C or hout before this
#if NORM_
#if MT != 1
#error "NORM_ needs MT == 1"
#endif
    __shared__ float red[16][33], rsc[16];
    {
        const int T = min(1024, (K + 31) / 32 * 32), nw = T / 32;
        for (int row = 0; row < 16 && m0 + row < M; row++) {
            const long long base = (long long)(m0 + row) * K;
            for (int vw = q; vw < nw; vw += S_) {        // virtual warp vw of the norm kernel
                const int tt = vw * 32 + lane;
                float ss = 0.f;
                for (int i = tt; i < K; i += T) {
                    const float v = xo ? __fadd_rn(xo[base + i], x[base + i]) : x[base + i];
                    ss = __fmaf_rn(v, v, ss);
                    if (hout && blockIdx.x == 0) hout[base + i] = v;
                }
                ss = warp_sum(ss);
                if (lane == 0) red[row][vw] = ss;
            }
        }
        __syncthreads();
        for (int row = q; row < 16; row += S_) {
            if (m0 + row >= M) break;
            float tot = lane < nw ? red[row][lane] : 0.f;
            tot = warp_sum(tot);
            if (lane == 0) rsc[row] = rms_scale(tot, K, eps);
        }
        __syncthreads();
    }
    const float r_lo = m0 + g < M ? rsc[g] : 0.f, r_hi = m0 + g + 8 < M ? rsc[g + 8] : 0.f;
#endif
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    for (int c0 = c_lo; c0 < c_hi; c0 += U_) {
        uint4 xl[U_][MT], xh[U_][MT];
#if PF_
        uint4 wc[U_][NT];                             // this round's weights; the next round's
#pragma unroll                                        // loads go out before its arithmetic
        for (int u = 0; u < U_; u++)
#pragma unroll
            for (int j = 0; j < NT; j++) wc[u][j] = w[u][j];
        if (c0 + U_ < c_hi) load_w(c0 + U_);
#else
        if (c0 != c_lo) load_w(c0);
        uint4 (&wc)[U_][NT] = w;
#endif
#pragma unroll
        for (int u = 0; u < U_; u++) {
            const int k = c0 + u < c_hi ? (c0 + u) * 32 + 8 * t : K;
#pragma unroll
            for (int i = 0; i < MT; i++) {
#if NORM_
                xl[u][i] = xnorm8(xo, x, nwt, r_lo, m0 + g, M, k, K);
                xh[u][i] = xnorm8(xo, x, nwt, r_hi, m0 + g + 8, M, k, K);
#else
                xl[u][i] = xrow8(x, m0 + 16 * i + g, M, k, K);
                xh[u][i] = xrow8(x, m0 + 16 * i + g + 8, M, k, K);
#endif
            }
        }
#pragma unroll
        for (int u = 0; u < U_; u++)
            if (c0 + u < c_hi) {
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT; j++) chunk(acc[i][j], xl[u][i], xh[u][i], wc[u][j]);
            }
    }
    constexpr int E = MT * NT * 128;                  // outputs of the block
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) part[q * E + ((i * NT + j) * 4 + r) * 32 + lane] = acc[i][j][r];
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += 32 * S_) {
        const int l = e & 31, r = (e >> 5) & 3, ij = e >> 7, i = ij / NT, j = ij % NT;
#if GLU_
        if (j >= NT / 2) continue;                    // up values are read with their gate
#endif
        float v = 0.f;
#pragma unroll
        for (int p = 0; p < S_; p++) v = __fadd_rn(v, part[p * E + e]);
        const int m = m0 + 16 * i + (l >> 2) + 8 * (r >> 1), n = 8 * group_of(j, n8) + 2 * (l & 3) + (r & 1);
#if GLU_
        const int F = N / 2;
        float vu = 0.f;
#pragma unroll
        for (int p = 0; p < S_; p++) vu = __fadd_rn(vu, part[p * E + e + (NT / 2) * 128]);
        if (m < M && n < F) {
            const float gv = bias ? v + b2f(bias[n]) : v, uv = bias ? vu + b2f(bias[F + n]) : vu;
            ((bf16*)C)[(long long)m * F + n] = f2b(silu_mul(gv, uv));
        }
#else
        if (m < M && n < N) C[(long long)m * N + n] = bias ? v + b2f(bias[n]) : v;
#endif
    }
}

#define BM 128
#define BN 128
#define ST 3
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
    unsigned d;
    asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }\n"
                 : "=r"(d) : "l"(dst));
    const int n = ok ? 16 : 0;                       // 0: fill the 16 bytes with zeros
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(d), "l"(src), "r"(n));
}
// a stage holds 64 k (two chunks) of BM x rows and BN W rows, 128 bytes a row in 8 pieces
// of 16; piece p of row r sits at p ^ 4 (r & 1), so the 8 lanes of a 16-byte access phase
// (rows g, g + 1, pieces t or 4 + t) hit 8 different bank groups.
__device__ __forceinline__ int sw(int r, int p) { return r * 64 + ((p ^ ((r & 1) << 2)) << 3); }

// grid (ceil(N / 128), ceil(M / 128), Z), 256 threads, dynamic shared memory ST stages; x bf16.
// Warp (wm, wn) owns rows 64 wm .. +63 and columns 32 wn .. +31 of the block's tile.
// Z == 1: the block sums every K range and folds them (tot); Z == S_: block z sums range z
// only and writes it to part[z] (`fold` kernel below adds them up in order).
extern "C" __global__ void __launch_bounds__(256, SPLIT_ONLY + 1) tiled(
        const bf16* x, const bf16* W, const bf16* bias, float* C, float* part,
        int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* xs = (bf16*)smem;
    bf16* ws = xs + ST * BM * 64;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int nch = (K + 31) / 32;
    const bool split = gridDim.z > 1;
    const int c_lo = split ? range_lo(blockIdx.z, nch) : 0;
    const int c_hi = split ? range_lo(blockIdx.z + 1, nch) : nch;
    const int s_lo = c_lo / 2, s_hi = (c_hi + 1) / 2;
    auto load = [&](int st) {
        bf16* xd = xs + (st % ST) * BM * 64;
        bf16* wd = ws + (st % ST) * BN * 64;
        for (int i = tid; i < BM * 8; i += 256) {
            const int r = i >> 3, p = i & 7, k = st * 64 + 8 * p;
            const int mx = min(m0 + r, M - 1), kk = min(k, K - 8);
            cp16(xd + sw(r, p), x + (long long)mx * K + kk, m0 + r < M && k < K);
            // W: consecutive i read consecutive 16 bytes of the Packed tiles: row rr (fastest),
            // piece pc, chunk h of the stage, column group G
            const int rr = i & 7, pc = (i >> 3) & 3, h = (i >> 5) & 1, rw = (i >> 6) * 8 + rr;
            const int n = n0 + rw, kw = st * 64 + 32 * h;
            const bool wok = n < N && kw < K;             // a chunk's stored pieces mix its k (pi order)
            cp16(wd + sw(rw, 4 * h + pc), W + (wok ? ((long long)(n >> 3) * nch + (kw >> 5)) * 256
                                                   + pc * 64 + rr * 8 : 0), wok);
        }
    };
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s_lo + s < s_hi) load(s_lo + s);
        asm volatile("cp.async.commit_group;\n");
    }
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;
#if !SPLIT_ONLY
    float tot[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) tot[i][j][r] = 0.f;
    int q = 0, q_end = split ? 0x7fffffff : range_lo(1, nch);
    auto fold = [&]() {                       // tot += this range's sum; the next starts at 0
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    tot[i][j][r] = __fadd_rn(tot[i][j][r], acc[i][j][r]);
                    acc[i][j][r] = 0.f;
                }
        q++;
        q_end = range_lo(q + 1, nch);
    };
#endif
    for (int st = s_lo; st < s_hi; st++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(ST - 2));
        __syncthreads();
        if (st + ST - 1 < s_hi) load(st + ST - 1);
        asm volatile("cp.async.commit_group;\n");
        const bf16* xb = xs + (st % ST) * BM * 64;
        const bf16* wb = ws + (st % ST) * BN * 64;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int c = 2 * st + h;
            if (c < c_lo || c >= c_hi) continue;
#if !SPLIT_ONLY
            while (c >= q_end) fold();
#endif
            uint4 wf[4];
#pragma unroll
            for (int j = 0; j < 4; j++) wf[j] = unpi(*(const uint4*)(wb + sw(32 * wn + 8 * j + g, 4 * h + t)));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = 64 * wm + 16 * i + g;
                const uint4 xl = *(const uint4*)(xb + sw(r, 4 * h + t));
                const uint4 xh = *(const uint4*)(xb + sw(r + 8, 4 * h + t));
#pragma unroll
                for (int j = 0; j < 4; j++) chunk(acc[i][j], xl, xh, wf[j]);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n");
    if (split) {
        float* pz = part + (long long)blockIdx.z * M * N;
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int m = m0 + 64 * wm + 16 * i + g, n = n0 + 32 * wn + 8 * j + 2 * t;
                store(pz, nullptr, M, N, m, n, acc[i][j][0], acc[i][j][1]);
                store(pz, nullptr, M, N, m + 8, n, acc[i][j][2], acc[i][j][3]);
            }
        return;
    }
#if !SPLIT_ONLY
    while (q < S_) fold();
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int m = m0 + 64 * wm + 16 * i + g, n = n0 + 32 * wn + 8 * j + 2 * t;
            store(C, bias, M, N, m, n, tot[i][j][0], tot[i][j][1]);
            store(C, bias, M, N, m + 8, n, tot[i][j][2], tot[i][j][3]);
        }
#endif
}

// C = (((0 + part[0]) + part[1]) + ...) + bias: the tiled kernel's fold, element by element
extern "C" __global__ void fold_parts(const float* part, const bf16* bias, float* C, int M, int N) {
    const long long n = (long long)M * N;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        float v = 0.f;
#pragma unroll
        for (int z = 0; z < S_; z++) v = __fadd_rn(v, part[z * n + e]);
        C[e] = bias ? v + b2f(bias[e % N]) : v;
    }
}
"""


_DEFINITION = _MMA + r"""
// The arithmetic itself, as plainly as it goes: one warp a 16 x 8 tile, W row-major [N, K] in
// natural order, every range read from global memory (zeros past M, N and K). Tests hold every
// kernel's bytes against it.
__device__ __forceinline__ uint4 row8(const bf16* a, int r, int R, int k, int K) {
    return r < R && k < K ? *(const uint4*)(a + (long long)r * K + k) : make_uint4(0, 0, 0, 0);
}
extern "C" __global__ void definition(const bf16* x, const bf16* W, const bf16* bias, float* C,
                                      int M, int N, int K) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 16, nch = (K + 31) / 32;
    float tot[4] = {0.f, 0.f, 0.f, 0.f};
    for (int q = 0; q < S_; q++) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int c = (int)((long long)q * nch / S_); c < (int)((long long)(q + 1) * nch / S_); c++) {
            const int k = 32 * c + 8 * t;
            const uint4 xl = row8(x, m0 + g, M, k, K), xh = row8(x, m0 + g + 8, M, k, K);
            const uint4 w = row8(W, n0 + g, N, k, K);
            mma(acc, xl.x, xh.x, xl.y, xh.y, w.x, w.y);            // k 8t .. 8t+3 of each quad
            mma(acc, xl.z, xh.z, xl.w, xh.w, w.z, w.w);            // k 8t+4 .. 8t+7
        }
        for (int r = 0; r < 4; r++) tot[r] = __fadd_rn(tot[r], acc[r]);
    }
    for (int r = 0; r < 4; r++) {
        const int m = m0 + g + 8 * (r >> 1), n = n0 + 2 * t + (r & 1);
        if (m < M && n < N) C[(long long)m * N + n] = bias ? tot[r] + b2f(bias[n]) : tot[r];
    }
}
"""


def definition(x, w, bias=None):
    """x [M, K] bf16 @ w [N, K] bf16 (plain, not Packed; K % 8 == 0) -> [M, N] float32 by the
    definition kernel (slow; tests)."""
    M, K = x.shape
    N = w.shape[0]
    out = cp.empty((M, N), dtype=cp.float32)
    kernel(_DEFINITION, "definition", (f"S_={KSPLIT}",))(
        (-(-N // 8), -(-M // 16)), (32,), (as_bf16(x), as_bf16(w), _bias(bias), out,
                                            np.int32(M), np.int32(N), np.int32(K)))
    return out


class Packed:
    """W [N, K] bf16 in tiles of 8 columns x 32 k (512 contiguous bytes: a warp's load of one
    chunk of a column group is one tile, as the decode GEMVs want; with 8 x 64-k tiles, 64 bytes
    a row a chunk, llama3-8b's decode step went 5.15 -> 5.62 ms at one row and 10.0 -> 12.2 at
    64 on the H200). data[N8][KC][4][8][8], N8 = ceil(N / 8), KC = ceil(K / 32): tile (n / 8,
    k / 32) holds the chunk's 32 k of columns 8 (n / 8) + g, g = 0..7, in "pi order" (the row's
    32-bit word 4i + t holds the k pair 8t + 2i, +1; position p = 16h + 8b + 2t + e holds
    k = 8t + 4h + 2b + e), stored as four "core matrices": piece i (16 bytes = words 4i..4i+3)
    of rows 0..7, 128 bytes each. Pi order is the order in which the arithmetic's two k16 steps
    take k (the module docstring): step h reads pieces 2h, 2h + 1 of every row, which is what
    wgmma reads from a K-major, unswizzled shared-memory tile, so kernels/wgmma_tma_cuda.py
    loads whole tiles with TMA; the streaming kernel loads a chunk as four 32-bit words, word t
    of row g of each piece (one whole 128-byte line a warp load, and natural order on arrival),
    the tiled kernel regroups its (g, t) shared-memory reads with `unpi`.
    Padding (N to 8, K to 32) is zeros."""

    def __init__(self, w):
        N, K = w.shape
        n8, kc = -(-N // 8), -(-K // 32)
        u = as_bf16(w).view(cp.uint16)
        if (n8 * 8, kc * 32) != (N, K):
            z = cp.zeros((n8 * 8, kc * 32), dtype=cp.uint16)
            z[:N, :K] = u
            u = z
        # [n8, g, kc, natural word 4t + i as (t, i), e] -> [n8, kc, piece i, g, t, e]
        self.data = cp.ascontiguousarray(
            u.reshape(n8, 8, kc, 4, 4, 2).transpose(0, 2, 4, 1, 3, 5)).view(BF16)
        self.shape, self.dtype, self.nbytes = (N, K), BF16, self.data.nbytes
        self.plain = w if KEEP_PLAIN else None       # benchmarks: cuBLAS on the same numbers


def pack(w) -> Packed:
    # quantized weights (kernels/qmatmul_cuda: planes / parts) stay as their blocks
    return w if isinstance(w, Packed) or hasattr(w, "planes") or hasattr(w, "parts") else Packed(w)


def pack_weights(sw) -> None:
    """Every GEMM matrix of a ShardWeights packed in place (one matrix at a time, so the
    peak is one matrix over the weights); a tied LM head gets its own packed copy."""
    for L in sw.layers:
        L.wqkv, L.wo, L.wgu, L.wdown = (pack(a) for a in (L.wqkv, L.wo, L.wgu, L.wdown))
    sw.lm_head = pack(sw.lm_head)


_TILED_SMEM = 3 * (128 + 128) * 64 * 2
def _stream_smem(mt: int, nt: int) -> int:
    return KSPLIT * mt * nt * 128 * 4


def _fn(name: str, x_f32: bool = False, mt: int = 1, nt: int = 1, u: int = 2,
        split_only: bool = False, glu: bool = False, norm: bool = False):
    defs = (f"XT={'float' if x_f32 else 'bf16'}", f"X_F32={int(x_f32)}", f"MT={mt}", f"NT={nt}",
            f"U_={u}", f"S_={KSPLIT}", f"SPLIT_ONLY={int(split_only)}", f"GLU_={int(glu)}",
            f"NORM_={int(norm)}", f"PF_={int(PF)}")
    smem = _TILED_SMEM if name == "tiled" else _stream_smem(mt, nt) if name == "stream" else 0
    return kernel(_SRC, name, defs, smem)


def stream_cfg(M: int):
    """(MT, NT, U) of the streaming kernel for M rows, or None above the table."""
    for top, mt, nt, u in STREAM_CFG:
        if M <= top:
            return mt, nt, u
    return None


_NULL = np.uint64(0)


def _bias(bias):
    if bias is None:
        return _NULL                                       # a null pointer: no bias
    return bias if bias.dtype == BF16 else as_bf16(bias)


def _stream(x, w, bias, out, N, cfg, glu=False, norm=None):
    """One streaming launch. glu: out is bf16 [M, N / 2] (SwiGLU epilogue); norm: (xo, norm
    weight, hout, eps): x is the residual h and rows are normed on load (MT must be 1)."""
    M, K = x.shape
    mt, nt, u = cfg
    I = np.int32
    if norm is not None:
        xo, nwt, hout, eps = norm
        extra = (_NULL if xo is None else xo, nwt, _NULL if hout is None else hout, np.float32(eps))
        x_f32 = True
    else:
        extra = (_NULL, _NULL, _NULL, np.float32(0))
        x_f32 = x.dtype != BF16
    x = cp.ascontiguousarray(x, dtype=cp.float32) if x_f32 else cp.ascontiguousarray(x)
    cols = N // 2 if glu else N                          # columns a block's NT groups cover
    launch(_fn("stream", x_f32, mt, nt, u, glu=glu, norm=norm is not None),
           (-(-cols // (8 * (nt // 2 if glu else nt))), -(-M // (16 * mt))), (32 * KSPLIT,),
           (x, pack(w).data, _bias(bias), out, I(M), I(N), I(K)) + extra,
           shared_mem=_stream_smem(mt, nt))


def cuda(x, w, bias=None, force: str | None = None, cfg: tuple | None = None):
    """x: [M, K] float32 or bf16; w: Packed (or [N, K], packed on the fly); bias: [N] bf16
    or None -> [M, N] float32. force: "stream", "tiled", "split", "wgmma", "wgmma_split",
    "tma" or "tma_split" (tests, benchmarks), else chosen by shape (on sm_90 "tma" / "wgmma" where
    kernels/wgmma_tma_cuda / wgmma_cuda say available); cfg: the streaming kernel's
    (MT, NT, U) (tests, sweeps). x may be a `Pi` (the TMA path then skips its permute)."""
    M, K = x.shape
    N = w.shape[0]
    x_pi = False
    if isinstance(x, Pi):
        x, x_pi = _unpi(x, force == "tma" or (force is None and INVARIANT and tma_rows(M, N, K, cfg)))
    if not INVARIANT and force is None:
        out = plain(x, w)
        return out if bias is None else out + as_f32(bias)
    _check(x, w)
    out = cp.empty((M, N), dtype=cp.float32)
    if not M or not N:
        return out
    tiles = -(-N // 128) * -(-M // 128)
    cfg = cfg or stream_cfg(M)
    if force is None and tma_rows(M, N, K, cfg):
        force = "tma"
    elif force is None and WGMMA and not cfg and wgmma_cuda().available(M, N, K):
        force = "wgmma"
    elif force is None and WGMMA and cfg and M >= WGMMA_SMALL[0]:
        if TMA_SMALL and wgmma_tma_cuda().available(M, N, K, min_tiles=WGMMA_SMALL[1]):
            force = "tma"                                     # decode rows: weights read once
        elif TMA_SMALL and wgmma_tma_cuda().split_available(M, N, K):
            force = "tma_split"
        elif wgmma_cuda().available(M, N, K, WGMMA_SMALL[1]):     # decode rows: weights read once
            force = "wgmma"
        elif wgmma_cuda().split_available(M, N, K, WGMMA_SMALL[1]):
            force = "wgmma_split"
    how = force or ("stream" if cfg else "split" if tiles < SPLIT_BELOW else "tiled")
    if how == "stream":
        _stream(x, w, bias, out, N, cfg or STREAM_CFG[-1][1:])
        return out
    w, bias, I = pack(w).data, _bias(bias), np.int32
    x = as_bf16(x)
    if how == "tma":                                    # Hopper: kernels/wgmma_tma_cuda.py
        wgmma_tma_cuda().cuda(x, w, None if bias is _NULL else bias, out, M, N, K, x_pi=x_pi)
        return out
    if how == "tma_split":                              # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_tma_cuda().cuda(x, w, None, part, M, N, K, split=True)
        return _fold(part, bias, out)
    if how == "wgmma":                                  # Hopper: kernels/wgmma_cuda.py
        wgmma_cuda().cuda(x, w, bias, out, M, N, K)
        return out
    if how == "wgmma_split":                            # its ranges apart, folded below
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        wgmma_cuda().cuda(x, w, _NULL, part, M, N, K, split=True)
        return _fold(part, bias, out)
    grid = (-(-N // 128), -(-M // 128))
    if how == "tiled":
        _fn("tiled")(grid + (1,), (256,), (x, w, bias, out, _NULL, I(M), I(N), I(K)),
                     shared_mem=_TILED_SMEM)
    else:
        part = cp.empty((KSPLIT, M, N), dtype=cp.float32)
        _fn("tiled", split_only=True)(grid + (KSPLIT,), (256,), (x, w, bias, out, part, I(M), I(N), I(K)),
                     shared_mem=_TILED_SMEM)
        _fold(part, bias, out)
    return out


class Pi:
    """A bf16 [M, K] activation that its producer wrote with each 32-k chunk in pi order
    (`Packed`'s order), for the TMA GEMM, which then skips its permute (rmsnorm_cuda's `pi`,
    the TMA GLU epilogue's `pi_out`); any other path takes `natural()` (the permute is its own
    inverse): the same bytes as a natural-order x either way."""

    def __init__(self, a):
        self.a, self.shape, self.dtype = a, a.shape, a.dtype

    def natural(self):
        return wgmma_tma_cuda().permute(self.a)

    def reshape(self, *shape):
        return Pi(self.a.reshape(*shape))


def _unpi(x, tma: bool):
    """(x for the chosen path, whether it is in pi order): a Pi stays so only for the TMA path."""
    if not isinstance(x, Pi):
        return x, False
    return (x.a, True) if tma else (x.natural(), False)


def tma_rows(M: int, N: int, K: int, cfg=None, glu: bool = False) -> bool:
    """Whether the dispatcher sends this shape (not forced) to kernels/wgmma_tma_cuda: more
    rows than STREAM_CFG covers, on sm_90, shapes it takes."""
    cfg = cfg or stream_cfg(M)
    return WGMMA and not cfg and wgmma_tma_cuda().available(M, N, K, glu=glu)


def _check(x, w) -> None:
    if w.shape[1] != x.shape[1] or x.shape[1] % 8:
        raise ValueError(f"matmul: x {x.shape} against w {w.shape} (K must match and be a multiple of 8)")


def _fold(part, bias, out):
    """out = the KSPLIT range sums in `part` [KSPLIT, M, N] folded in order (+ bias)."""
    M, N = out.shape
    _fn("fold_parts")((min(-(-M * N // 256), 65535),), (256,), (part, bias, out, np.int32(M), np.int32(N)))
    return out


def wgmma_cuda():
    from kernels import wgmma_cuda as mod
    return mod


def wgmma_tma_cuda():
    from kernels import wgmma_tma_cuda as mod
    return mod


def _glu_fused(w, F, cfg) -> bool:
    return cfg is not None and F % 8 == 0 and INVARIANT and w.shape[0] == 2 * F


def cuda_glu(x, w, F: int, bias=None, force: str | None = None, cfg: tuple | None = None,
             pi_out: bool = False):
    """silu(x @ Wg^T) * (x @ Wu^T) as bf16 [M, F], w: the gate|up matrix [2F, K] (gate rows
    then up rows). Decode sizes: one streaming launch with SwiGLU in its epilogue; more than
    64 rows on sm_90: the TMA GEMM with SwiGLU in its epilogue; else the GEMM then
    kernels/swiglu_cuda. All: the GEMM's float32 values, then common_cuda's silu_mul, rounded
    to bf16 once: the same bytes (tests/gpu/test_kernels.py, test_gemm_definition.py). x may
    be a `Pi`; pi_out: where the TMA GEMM runs, the result is a `Pi` (for a next TMA GEMM)."""
    M, K = x.shape
    cfg = cfg or stream_cfg(M)
    small = cfg is not None and TMA_SMALL and M >= WGMMA_SMALL[0]        # 17..64 rows
    tma = ((force == "tma" or (force is None and (cfg is None or small) and WGMMA)) and INVARIANT
           and w.shape[0] == 2 * F
           and wgmma_tma_cuda().available(M, 2 * F, K, glu=True, min_tiles=WGMMA_SMALL[1] if small else 0))
    x, x_pi = _unpi(x, tma)
    if tma:
        _check(x, w)                     # prefill rows on sm_90: SwiGLU in the TMA GEMM's epilogue
        out = cp.empty((M, F), dtype=BF16)
        wgmma_tma_cuda().cuda(as_bf16(x), pack(w).data, None if bias is None else _bias(bias),
                              out, M, 2 * F, K, glu=True, x_pi=x_pi, pi_out=pi_out)
        return Pi(out) if pi_out else out
    if (force is None and cfg is not None and WGMMA and M >= WGMMA_SMALL[0] and w.shape[0] == 2 * F
            and wgmma_cuda().available(M, 2 * F, K, WGMMA_SMALL[1])):
        force = "wgmma"                  # a wide gate|up at 17..64 rows: weights read once
    if (force or ("stream" if cfg else "")) != "stream" or not _glu_fused(w, F, cfg or STREAM_CFG[-1][1:]):
        from kernels import swiglu_cuda
        gu = cuda(x, w, bias, force=force, cfg=cfg)
        return swiglu_cuda.cuda(gu[:, :F], gu[:, F:])
    _check(x, w)
    mt, nt, u = cfg or STREAM_CFG[-1][1:]
    out = cp.empty((M, F), dtype=BF16)
    if M:
        _stream(x, w, bias, out, 2 * F, (mt, max(2, nt), u), glu=True)   # a gate and an up group at least
    return out


def cuda_norm(xo, h, norm_w, eps, w, bias=None, glu_F: int | None = None, fuse: bool | None = None,
              cfg: tuple | None = None, pi_out: bool = False):
    """The layer's residual add and RMSNorm with the next GEMM: h' = xo + h (h alone when xo
    is None), y = rmsnorm(h') @ W^T (with SwiGLU when glu_F: bf16 [M, glu_F]). Up to 16 rows
    of up to FUSE_NORM_MAX_K (and FUSE_NORM): one streaming launch that norms rows as it
    loads them; else rmsnorm_cuda then the GEMM. The same bytes either way. Returns (y, h').
    cfg: the streaming kernel's (MT, NT, U) (tests, sweeps); else stream_cfg(M), widened to
    NORM_WIDE's NT for many columns (each block norms its rows once: fewer, wider blocks).
    Where the GEMM is the TMA kernel, rmsnorm_cuda writes its rows in pi order (no permute);
    pi_out (glu): cuda_glu's `pi_out` (y may be a `Pi`, for the down GEMM)."""
    from kernels import rmsnorm_cuda
    M, K = h.shape
    if cfg is None:
        cfg = stream_cfg(M)
        if cfg is not None and glu_F is None and w.shape[0] >= NORM_WIDE[0]:
            cfg = NORM_WIDE[1:]
    fuse = FUSE_NORM if fuse is None else fuse
    ok = (fuse and INVARIANT and cfg is not None and cfg[0] == 1 and K % 8 == 0 and M > 0
          and K <= FUSE_NORM_MAX_K
          and w.shape[1] == K and (glu_F is None or _glu_fused(w, glu_F, cfg)))
    if not ok:
        N = w.shape[0]
        pi = INVARIANT and K % 32 == 0 and tma_rows(M, N, K, glu=glu_F is not None and N == 2 * glu_F)
        if xo is None:
            x, hn = rmsnorm_cuda.cuda(h, norm_w, eps, pi), h
        else:
            x, hn = rmsnorm_cuda.add_cuda(xo, h, norm_w, eps, pi)
        x = Pi(x) if pi else x
        return (cuda(x, w, bias) if glu_F is None else cuda_glu(x, w, glu_F, bias, pi_out=pi_out)), hn
    h = cp.ascontiguousarray(h, dtype=cp.float32)
    if xo is not None:
        xo = cp.ascontiguousarray(xo, dtype=cp.float32)
    hn = h if xo is None else cp.empty_like(h)
    mt, nt, u = cfg
    if glu_F is None:
        out = cp.empty((M, w.shape[0]), dtype=cp.float32)
        _stream(h, w, bias, out, w.shape[0], cfg, norm=(xo, norm_w, None if xo is None else hn, eps))
    else:
        out = cp.empty((M, glu_F), dtype=BF16)
        _stream(h, w, bias, out, 2 * glu_F, (mt, max(2, nt), u), glu=True,
                norm=(xo, norm_w, None if xo is None else hn, eps))
    return out, hn


# -- plain cuBLAS, for the benchmarks' "what invariance costs" ------------------------------
_R_16BF, _R_32F, _COMPUTE_32F, _DEFAULT = 14, 0, 68, -1
_ONE = np.ones(1, dtype=np.float32)
_ZERO = np.zeros(1, dtype=np.float32)
_WORKSPACE = 32 << 20


class _Cublas:
    """cuBLAS through ctypes on cupy's handle (cupy's wrappers refuse to run while a stream
    captures). cublasSetStream resets the workspace to cuBLAS's own pool, so the fixed
    workspace is set again after every stream change."""

    def __init__(self):
        self.handle = cp.cuda.device.get_cublas_handle()      # loads libcublas
        path = next(line.split()[-1] for line in open("/proc/self/maps")
                    if "libcublas.so" in line and "libcublasLt" not in line)
        self.lib = ctypes.CDLL(path)
        self.ws = cp.empty(_WORKSPACE, dtype=cp.uint8)
        self.stream = None

    def _check(self, status, what):
        if status != 0:
            raise RuntimeError(f"cublas{what} failed with status {status}")

    def gemm_tn(self, M, N, K, x, w, c):
        # row-major C[M, N] = x[M, K] @ w[N, K]^T  (column-major: C^T = w^T' x^T)
        s = cp.cuda.get_current_stream().ptr
        V, I = ctypes.c_void_p, ctypes.c_int
        if s != self.stream:
            self._check(self.lib.cublasSetStream_v2(V(self.handle), V(s)), "SetStream")
            self._check(self.lib.cublasSetWorkspace_v2(V(self.handle), V(self.ws.data.ptr),
                                                       ctypes.c_size_t(_WORKSPACE)), "SetWorkspace")
            self.stream = s
        self._check(self.lib.cublasGemmEx(
            V(self.handle), I(1), I(0), I(N), I(M), I(K), V(_ONE.ctypes.data), V(w), I(_R_16BF),
            I(K), V(x), I(_R_16BF), I(K), V(_ZERO.ctypes.data), V(c), I(_R_32F), I(N),
            I(_COMPUTE_32F), I(_DEFAULT)), "GemmEx")


_blas = None


def plain(x, w):
    """One cuBLAS GEMM, x [M, K] @ w[N, K]^T -> [M, N] float32. Not batch invariant.
    w: [N, K] bf16, or a Packed whose unpacked form is kept as `.plain` (benchmarks)."""
    if isinstance(w, Packed):
        w = w.plain
    global _blas
    if _blas is None:
        _blas = _Cublas()
    x = as_bf16(x)
    M, K = x.shape
    out = cp.empty((M, w.shape[0]), dtype=cp.float32)
    if M:
        _blas.gemm_tn(M, w.shape[0], K, x.data.ptr, w.data.ptr, out.data.ptr)
    return out
