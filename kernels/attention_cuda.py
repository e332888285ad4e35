"""Causal attention over pages on the GPU on tensor cores (mma.sync m16n8k16, bf16 x bf16 ->
f32; sm_80 and later), decode and prefill in one launch per layer, with long rows split over
keys (flash-decoding) and folded in a fixed order.

THE ARITHMETIC of one query row at position p, q head h (kv head h / G):
  q is the float32 rotated query rounded to bf16 (RNE); K, V are the pool's bf16 rows.
  Keys 0..p fall into spans of SPAN = 64: span j = keys [64j, min(64j + 64, p + 1)); a span's
  keys sit in 8 n8 tiles, key 64j + 8nt + c in column c of tile nt. For each span, in order:
  (1) S_k = a chain of HD/16 mma.sync from C = 0, step dc multiplying q[16dc..16dc+15] by
      k[16dc..16dc+15] (the query in some m-row of A, the key in some column of B);
  (2) s_k = S_k * scale (rounded) for k <= p, -inf past p;
  (3) the span's max m: thread t of the row's quad takes keys with k mod 8 in {2t, 2t+1},
      fmaxf over tiles nt = 0..7 then the two columns, then over the quad (xor 1, then 2);
  (4) w_k = expf(s_k - m) for k <= p, 0 past p (a select); P_k = bf16(w_k) (RNE);
  (5) l: thread t sums its P_k (as f32) in the order of (3), then (l0 + l1) + (l2 + l3) by
      xor 1 then 2;
  (6) acc[d] = a chain of 4 mma.sync from 0, step kc multiplying P of keys 16kc..16kc+15 by
      V of those keys (keys past p have P = 0; their V is finite: a later row of the same
      chunk, or zero-filled past the tile's last row);
  (7) fold (m, l, acc) into the running (M, L, A) (M = -inf, L = A = 0 before span 0):
      mn = max(M, m); ca = expf(M - mn), cb = expf(m - mn); L = L ca + l cb;
      A = A ca + acc cb (each product and sum rounded on its own); M = mn.
  out = bf16(A * rcp_rn(L)) (RNE). A span with no key <= p is never folded.
Every step on a row's values is fixed by p and HD: the row's m-row in the mma, the rows
beside it, the tile and the launch mode do not change its bits (mma.sync's row i of D
depends on row i of A only; tests/gpu check every output bit against `reference`, a kernel
that runs the definition with the query alone in m-row 0). Hence paged == window, solo ==
concurrent, resumed == fresh and chunked == whole, byte for byte.

Who computes a span is scheduling, not arithmetic. `attend` runs in one of two modes:
  * in-block (split = 0): grid (tiles, kv heads); a block walks its tile's spans in order
    and folds them in registers;
  * split (split = 1): grid (tiles, kv heads, Z); block z computes spans z, z+Z, ... of its
    tile and writes each span's state (m, l, acc: float32, exact) to a scratch buffer; the
    tile's last block to finish (a count per tile and kv head, left at zero) folds each
    row's spans in order 0, 1, 2, ... and writes the output. Rows with one span (p < SPAN)
    are folded and written by their span-0 block.
The mode is chosen per launch from shapes only (tiles x kv heads, the table width W and the
page rows P), so a CUDA graph captures one mode per bucket and the scratch is sized by W.

A block: 4 warps, 64 (row, q head) pairs of one kv head (pair i: row r0 + i / G, head
kvh G + i % G; warp w holds pairs 16w..16w+15 as its m-rows), up to 64 / G consecutive rows
of one chunk. The heads share each K/V load: a span's 64 keys of K and V go through shared
memory by cp.async (zero fill past the tile's last row), XOR-swizzled for ldmatrix, the next
span fetched during this one (PREFETCH; scheduling only). Rows with p < 0 are padding
(CUDA-graph buckets): no keys are read, zeros are written.
"""
from __future__ import annotations

import cupy as cp
import numpy as np

from kernels.attention import GPU_HEAD_DIMS
from kernels.common_cuda import BF16, kernel, launch

PAIRS = 64          # (row, q head) pairs a block serves: 4 warps x 16 m-rows
SPAN = 64           # keys a span: the arithmetic (8 n8 tiles of keys; fixed by the kernel)
SPLIT_BLOCKS = 512  # split when tiles x kv heads is below this (scheduling only)
SPLIT_TARGET = 512  # blocks aimed at in split mode: Z = ceil(this / (tiles x kv heads)), <= spans
SCRATCH_MAX = 128 << 20  # bytes of span states a launch may use; above it: in-block
FORCE_SPLIT = None  # tests: True / False forces a mode, None chooses by shape
PREFETCH = True     # fetch span j+1's keys while span j is computed (scheduling only)
HEAD_DIMS = GPU_HEAD_DIMS  # head dims built (the swizzle wants >= 8 chunks of 16 bytes a row)

_MMA = r"""
#define NEG_INF __int_as_float(0xff800000u)
#define SPAN 64
#define NC (HD / 8)          // 16-byte chunks of a row; also the n8 tiles of d
__device__ __forceinline__ unsigned pack_bf16(float lo, float hi) {   // RNE, lo in bits 0..15
    unsigned r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
__device__ __forceinline__ float lo_f(unsigned w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_f(unsigned w) { return __uint_as_float(w & 0xffff0000u); }
// what the pair hw = pack_bf16(x, y) leaves out, as bf16: x = hw.lo + rest.lo to ~16 bits
__device__ __forceinline__ unsigned rest_bf16(float x, float y, unsigned hw) {
    return pack_bf16(__fsub_rn(x, lo_f(hw)), __fsub_rn(y, hi_f(hw)));
}
__device__ __forceinline__ void mma(float (&d)[4], unsigned a0, unsigned a1, unsigned a2,
                                    unsigned a3, unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// The pieces of steps (2)-(5) on one n8 tile's C fragment c (c[0..1]: row g's keys key, key + 1;
// c[2..3]: row g + 8's; key = k0 + 8 nt + 2t), so every path runs the same operations.
// (2), (3): scale and mask in place, then the thread's running maxima
template <bool MASK = true>
__device__ __forceinline__ void scale_mask(float (&c)[4], int key, int p0, int p1, float scale,
                                           float& m0, float& m1) {
#pragma unroll
    for (int e = 0; e < 2; e++) {
        c[e] = !MASK || key + e <= p0 ? __fmul_rn(c[e], scale) : NEG_INF;
        c[2 + e] = !MASK || key + e <= p1 ? __fmul_rn(c[2 + e], scale) : NEG_INF;
        m0 = fmaxf(m0, c[e]);
        m1 = fmaxf(m1, c[2 + e]);
    }
}
__device__ __forceinline__ float quad_max(float v) {
    v = fmaxf(v, __shfl_xor_sync(FULL, v, 1));
    return fmaxf(v, __shfl_xor_sync(FULL, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
    v = __fadd_rn(v, __shfl_xor_sync(FULL, v, 1));
    return __fadd_rn(v, __shfl_xor_sync(FULL, v, 2));
}
// (4): the weights w = expf(s - m) (0 past p) as bf16 high words P0 (row g), P1 (row g + 8)
// and the rest Q0, Q1
template <bool MASK = true>
__device__ __forceinline__ void weights(const float (&c)[4], int key, int p0, int p1, float m0,
                                        float m1, unsigned& P0, unsigned& P1, unsigned& Q0,
                                        unsigned& Q1) {
    const float x0 = !MASK || key <= p0 ? expf(__fsub_rn(c[0], m0)) : 0.f;
    const float x1 = !MASK || key + 1 <= p0 ? expf(__fsub_rn(c[1], m0)) : 0.f;
    const float x2 = !MASK || key <= p1 ? expf(__fsub_rn(c[2], m1)) : 0.f;
    const float x3 = !MASK || key + 1 <= p1 ? expf(__fsub_rn(c[3], m1)) : 0.f;
    P0 = pack_bf16(x0, x1);
    P1 = pack_bf16(x2, x3);
    Q0 = rest_bf16(x0, x1, P0);
    Q1 = rest_bf16(x2, x3, P1);
}
// (5): one word pair's weights (high + rest, key 2t then 2t + 1) added to the thread's l
__device__ __forceinline__ void add_l(float& l, unsigned P, unsigned Q) {
    l = __fadd_rn(l, __fadd_rn(lo_f(P), lo_f(Q)));
    l = __fadd_rn(l, __fadd_rn(hi_f(P), hi_f(Q)));
}
// Steps (2)-(5) for the two m-rows a thread serves (g and g + 8 of its warp): s[nt] is tile nt's
// C fragment. p0, p1: the rows' positions (-1: none). Out: P[nt][0] / P[nt][1] the rows' bf16
// high pairs, Q the rest, m and l of each row (the same in the quad).
// MASK = false: every key of the span is <= both rows' positions (the masks are all true: the
// same values without the compares)
template <bool MASK = true>
__device__ __forceinline__ void span_softmax(float (&s)[8][4], int p0, int p1, int k0, int t,
                                             float scale, unsigned (&P)[8][2], unsigned (&Q)[8][2],
                                             float& m0, float& m1, float& l0, float& l1) {
    m0 = NEG_INF;
    m1 = NEG_INF;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) scale_mask<MASK>(s[nt], k0 + 8 * nt + 2 * t, p0, p1, scale, m0, m1);
    m0 = quad_max(m0);
    m1 = quad_max(m1);
    l0 = 0.f;
    l1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        weights<MASK>(s[nt], k0 + 8 * nt + 2 * t, p0, p1, m0, m1, P[nt][0], P[nt][1], Q[nt][0], Q[nt][1]);
        add_l(l0, P[nt][0], Q[nt][0]);
        add_l(l1, P[nt][1], Q[nt][1]);
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
}
// Step (7) on one element, with the row's scales: every kernel and mode folds through these.
__device__ __forceinline__ void fold_scales(float M, float m2, float& mn, float& ca, float& cb) {
    mn = fmaxf(M, m2);
    ca = expf(__fsub_rn(M, mn));
    cb = expf(__fsub_rn(m2, mn));
}
__device__ __forceinline__ float fold_el(float A, float a, float ca, float cb) {
    return __fadd_rn(__fmul_rn(A, ca), __fmul_rn(a, cb));
}
// fold a span's state into row half hh (0: row g, C elements 0, 1; 1: row g + 8, 2, 3) of
// N d tiles (all NC of them, or a warp's share)
template <int N, int NA>
__device__ __forceinline__ void fold(float& M, float& L, float (&A)[NA][4], int hh, float m2,
                                     float l2, const float (&a)[N][4]) {
    float mn, ca, cb;
    fold_scales(M, m2, mn, ca, cb);
    L = fold_el(L, l2, ca, cb);
#pragma unroll
    for (int dt = 0; dt < N; dt++)
#pragma unroll
        for (int e = 0; e < 2; e++) A[dt][2 * hh + e] = fold_el(A[dt][2 * hh + e], a[dt][2 * hh + e], ca, cb);
    M = mn;
}
__device__ __forceinline__ float out_el(float A, float L) { return __fmul_rn(A, __frcp_rn(L)); }
// row half hh's output of N d tiles from o: d = 8dt + 2t, 2t + 1 as one 32-bit word each dt;
// zeros for padding
// PI_: each 32-element chunk of an output row in pi order (matmul_cuda.Pi: the o GEMM's x for
// its TMA kernel): natural word 4dt + t is stored as word 16 (dt / 4) + 4t + dt % 4
#ifndef PI_
#define PI_ 0
#endif
__device__ __forceinline__ int out_at(int dt, int t) {                // element of d pair 8dt + 2t
    return 2 * (PI_ ? 16 * (dt >> 2) + 4 * t + (dt & 3) : 4 * dt + t);
}
__device__ __forceinline__ int out_at1(int d) {                       // element d alone
    return PI_ ? (d & ~31) + 8 * ((d >> 1) & 3) + 2 * ((d >> 3) & 3) + (d & 1) : d;
}
template <int N, int NA>
__device__ __forceinline__ void finish(const float (&A)[NA][4], float L, int hh, int t, bool pad,
                                       bf16* o, int dt0 = 0) {
#pragma unroll
    for (int dt = 0; dt < N; dt++)
        *(unsigned*)(o + out_at(dt0 + dt, t)) = pad ? 0u :
            pack_bf16(out_el(A[dt][2 * hh], L), out_el(A[dt][2 * hh + 1], L));
}
"""

_SRC = _MMA + r"""
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void cp16z(unsigned dst, const void* src, bool ok) {  // zero fill
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// element offset of (row, 16-byte chunk c) in a [rows][HD] bf16 tile: chunk c ^ (row & 7)
__device__ __forceinline__ int sw(int row, int c) { return row * HD + ((c ^ (row & 7)) << 3); }

// Step (1) pieces: q's A fragments (high qa, rest qb) for d chunks 2dp, 2dp + 1 of a warp's
// 16 m-rows, and one key tile's chain steps over those chunks (high, then rest, each chunk)
__device__ __forceinline__ void q_frags(unsigned (&qa)[2][4], unsigned (&qb)[2][4],
                                        const bf16* qw, const bf16* qwl, int dp, int lane) {
#pragma unroll
    for (int e = 0; e < 2; e++) {                             // a0..a3: rows 0-7/8-15 x d lo/hi
        const int at = sw((lane & 7) + 8 * ((lane >> 3) & 1), 2 * (2 * dp + e) + (lane >> 4));
        ldsm4(qa[e], smem_u32(qw + at));
        ldsm4(qb[e], smem_u32(qwl + at));
    }
}
__device__ __forceinline__ void score_steps(float (&c)[4], const unsigned (&qa)[2][4],
                                            const unsigned (&qb)[2][4], const bf16* kb, int nt,
                                            int dp, int lane) {
    unsigned kf[4];                                           // keys 8nt.., d chunks 4dp..4dp+3
    ldsm4(kf, smem_u32(kb + sw(8 * nt + (lane & 7), 4 * dp + (lane >> 3))));
    mma(c, qa[0][0], qa[0][1], qa[0][2], qa[0][3], kf[0], kf[1]);
    mma(c, qb[0][0], qb[0][1], qb[0][2], qb[0][3], kf[0], kf[1]);
    mma(c, qa[1][0], qa[1][1], qa[1][2], qa[1][3], kf[2], kf[3]);
    mma(c, qb[1][0], qb[1][1], qb[1][2], qb[1][3], kf[2], kf[3]);
}

// Step (7) at a span's end for a thread's two rows: fold the span's state (N d tiles from
// d tile dt0) into the running state, or, in split mode for rows of two spans or more, hand it
// to the scratch (m and l written by the thread `writer`).
template <int N>
__device__ __forceinline__ void span_end(const float (&acc)[N][4], int dt0, bool writer, int k0,
        int p0, int p1, float m0, float m1, float l0, float l1, int split, int j, int NS,
        long long wa, long long wb, float (&M)[2], float (&L)[2], float (&A)[NC][4], float* sm,
        float* sl, float* sa, int t) {
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int p = hh ? p1 : p0;
        if (k0 > p) continue;
        if (!split || p < SPAN) {
            if (hh) fold<N>(M[1], L[1], A, 1, m1, l1, acc);
            else fold<N>(M[0], L[0], A, 0, m0, l0, acc);
        } else {
            const long long st = (hh ? wb : wa) * NS + j;
            if (writer) { sm[st] = hh ? m1 : m0; sl[st] = hh ? l1 : l0; }
#pragma unroll
            for (int i = 0; i < N; i++)
                *(float2*)(sa + st * HD + 8 * (dt0 + i) + 2 * t) =
                    make_float2(acc[i][2 * hh], acc[i][2 * hh + 1]);
        }
    }
}

#define NCW (NC / 4)         // d tiles a warp in a decode tile's P V
// One span of a decode tile (<= 16 pairs, the m-rows of every warp), the 4 warps sharing it:
// steps (1)-(7) of the definition with the same operations in the same order as the one-warp
// path (span_softmax and the P V chains), only spread over warps (see `dec` in attend).
__device__ __forceinline__ void dec_span(const bf16* qw, const bf16* qwl, const bf16* kb,
        const bf16* vb, int k0, int p0, int p1, float scale, int split, int j, int NS,
        long long wa, long long wb, float (&M)[2], float (&L)[2], float (&A)[NC][4], float* sm,
        float* sl, float* sa, float (&pm)[4][16], unsigned (&Ps)[16][33], unsigned (&Qs)[16][33]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    // (1) raw scores of key tiles 2w, 2w + 1, each chain as in the one-warp path
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int dp = 0; dp < HD / 32; dp++) {
        unsigned qa[2][4], qb[2][4];
        q_frags(qa, qb, qw, qwl, dp, lane);
#pragma unroll
        for (int i = 0; i < 2; i++) score_steps(s[i], qa, qb, kb, 2 * warp + i, dp, lane);
    }
    // (2), (3): scale, mask, the span max (exact in any order) through shared memory
    float m0 = NEG_INF, m1 = NEG_INF;
#pragma unroll
    for (int i = 0; i < 2; i++) scale_mask(s[i], k0 + 8 * (2 * warp + i) + 2 * t, p0, p1, scale, m0, m1);
    m0 = quad_max(m0);
    m1 = quad_max(m1);
    if (t == 0) { pm[warp][g] = m0; pm[warp][g + 8] = m1; }
    __syncthreads();
    m0 = fmaxf(fmaxf(pm[0][g], pm[1][g]), fmaxf(pm[2][g], pm[3][g]));
    m1 = fmaxf(fmaxf(pm[0][g + 8], pm[1][g + 8]), fmaxf(pm[2][g + 8], pm[3][g + 8]));
    // (4) this warp's weights, high and rest, to shared memory: word [row][4 nt + t]
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int nt = 2 * warp + i;
        weights(s[i], k0 + 8 * nt + 2 * t, p0, p1, m0, m1, Ps[g][4 * nt + t], Ps[g + 8][4 * nt + t],
                Qs[g][4 * nt + t], Qs[g + 8][4 * nt + t]);
    }
    __syncthreads();
    // (5) l, every warp the same bits: span_softmax's order
    float l0 = 0.f, l1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        add_l(l0, Ps[g][4 * nt + t], Qs[g][4 * nt + t]);
        add_l(l1, Ps[g + 8][4 * nt + t], Qs[g + 8][4 * nt + t]);
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    // (6) acc of d tiles NCW w + i, each chain as in the one-warp path
    float acc[NCW][4];
#pragma unroll
    for (int i = 0; i < NCW; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        const int c0 = 4 * (2 * kc) + t, c1 = 4 * (2 * kc + 1) + t;
        const unsigned pa0 = Ps[g][c0], pa1 = Ps[g + 8][c0], pa2 = Ps[g][c1], pa3 = Ps[g + 8][c1];
        const unsigned qa0 = Qs[g][c0], qa1 = Qs[g + 8][c0], qa2 = Qs[g][c1], qa3 = Qs[g + 8][c1];
#pragma unroll
        for (int dl = 0; dl < NCW / 2; dl++) {
            const int dp = (NCW / 2) * warp + dl;
            unsigned vf[4];
            ldsm4t(vf, smem_u32(vb + sw(16 * kc + (lane & 7) + 8 * ((lane >> 3) & 1),
                                        2 * dp + (lane >> 4))));
            mma(acc[2 * dl], pa0, pa1, pa2, pa3, vf[0], vf[1]);
            mma(acc[2 * dl], qa0, qa1, qa2, qa3, vf[0], vf[1]);
            mma(acc[2 * dl + 1], pa0, pa1, pa2, pa3, vf[2], vf[3]);
            mma(acc[2 * dl + 1], qa0, qa1, qa2, qa3, vf[2], vf[3]);
        }
    }
    __syncthreads();                  // Ps, Qs, pm are read: the next span may rewrite them
    // (7) this warp's d tiles (M and L: every warp the same)
    span_end<NCW>(acc, NCW * warp, t == 0 && warp == 0, k0, p0, p1, m0, m1, l0, l1, split, j, NS,
                  wa, wb, M, L, A, sm, sl, sa, t);
}

// grid (tiles, kv heads, Z), 128 threads, dynamic shared memory (128 + 4 SPAN) HD bf16
extern "C" __global__ void __launch_bounds__(128, 2) attend(
        const float* __restrict__ q, const bf16* __restrict__ kp, const bf16* __restrict__ vp,
        const int* tables, int W, const int* slot, const int* pos, const int* tile_row,
        const int* tile_n, int P, int NQ, int KV, int G, float scale, bf16* out,
        int split, int NS, float* sm, float* sl, float* sa, int* count) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16* qs = (bf16*)smem_raw;                    // [64 pairs][HD]: q's high bf16
    bf16* ql = qs + 64 * HD;                       // [64 pairs][HD]: q - high, as bf16
    bf16* ks = ql + 64 * HD;                       // [2][SPAN keys][HD]
    bf16* vs = ks + 2 * SPAN * HD;                 // [2][SPAN keys][HD]
    pdl_trigger();
    pdl_wait();                                   // q, the pools and the map: after this
    const int kvh = blockIdx.y, r0 = tile_row[blockIdx.x], nr = tile_n[blockIdx.x];
    const int s = slot[r0], pmax = pos[r0 + nr - 1];
    const int z = split ? blockIdx.z : 0, zstep = split ? gridDim.z : 1;
    if (z > 0 && (long long)z * SPAN > pmax) return;          // no span of this block: uniform
    const int npairs = nr * G, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    // the pairs' queries, bf16 (RNE), swizzled; pairs past npairs are zero
    for (int i = tid; i < 64 * NC; i += 128) {
        const int pr = i / NC, c = i % NC;
        uint4 w = make_uint4(0u, 0u, 0u, 0u), v = w;
        if (pr < npairs) {
            const float4* src = (const float4*)(q + ((long long)(r0 + pr / G) * NQ + kvh * G + pr % G) * HD + 8 * c);
            const float4 a = src[0], b = src[1];
            w = make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y),
                           pack_bf16(b.z, b.w));
            v = make_uint4(rest_bf16(a.x, a.y, w.x), rest_bf16(a.z, a.w, w.y),
                           rest_bf16(b.x, b.y, w.z), rest_bf16(b.z, b.w, w.w));
        }
        *(uint4*)(qs + sw(pr, c)) = w;
        *(uint4*)(ql + sw(pr, c)) = v;
    }
    // decode tiles (16 pairs or fewer: one warp's m-rows) share each span among the 4 warps:
    // warp w takes key tiles 2w, 2w + 1 of the scores and d tiles NCW w .. of P V, and the
    // span's max, weights and l go through shared memory, in the same order (scheduling only)
    const bool dec = npairs <= 16;
    __shared__ float pm[4][16];                               // dec: each warp's span maxima
    __shared__ unsigned Ps[16][33], Qs[16][33];               // dec: the span's P, rest words
    const int w0 = dec ? 0 : 16 * warp;                       // this warp's first m-row pair
    const int pa = w0 + g, pb = pa + 8;                       // this thread's two m-rows
    const int p0 = pa < npairs ? pos[r0 + pa / G] : -1;
    const int p1 = pb < npairs ? pos[r0 + pb / G] : -1;
    const int wl = min(w0 + 15, npairs - 1);
    const int wpmax = wl >= w0 ? pos[r0 + wl / G] : -1;       // the warp's last row
    const long long wa = (long long)(r0 + pa / G) * NQ + kvh * G + pa % G;   // (row, head) index
    const long long wb = (long long)(r0 + pb / G) * NQ + kvh * G + pb % G;
    const int* tab = tables + (long long)s * W;
    // span j's K and V into buffer b: keys past the tile's last row are zero (V must be finite).
    // Thread tid copies chunk tid % NC of rows tid / NC + RS u; the page of a key by a shift
    // where the page rows are a power of two (a division was ~a quarter of the loop's
    // instructions), 64-bit math only for the page's base
    constexpr int RS = 128 / NC;                               // rows a pass of the block
    static_assert(RS % 8 == 0, "a pass keeps a row's swizzle phase");
    const int r_ld = tid / NC, c_ld = tid % NC, sw_ld = sw(r_ld, c_ld);
    const int pshift = (P & (P - 1)) == 0 ? __ffs(P) - 1 : -1;
    const long long page_el = (long long)P * KV * HD;
    const int in_page = kvh * HD + 8 * c_ld;
    auto load = [&](int j, int b) {
        const int k0 = j * SPAN, kend = min(pmax, k0 + SPAN - 1);
        bf16* kd = ks + b * SPAN * HD + sw_ld;
        bf16* vd = vs + b * SPAN * HD + sw_ld;
#pragma unroll
        for (int u = 0; u < SPAN / RS; u++) {
            const int key = k0 + r_ld + RS * u;
            const bool ok = key <= kend;
            const int pg = pshift >= 0 ? key >> pshift : key / P;
            const long long off = ok ? (long long)tab[pg] * page_el + (key - pg * P) * (KV * HD) + in_page : 0;
            cp16z(smem_u32(kd + RS * u * HD), kp + off, ok);
            cp16z(smem_u32(vd + RS * u * HD), vp + off, ok);
        }
    };
    float M[2] = {NEG_INF, NEG_INF}, L[2] = {0.f, 0.f}, A[NC][4];
#pragma unroll
    for (int dt = 0; dt < NC; dt++) A[dt][0] = A[dt][1] = A[dt][2] = A[dt][3] = 0.f;
    const int nsp = pmax < 0 ? 0 : pmax / SPAN + 1;           // spans of the tile's last row
    if (PF_ && z < nsp) load(z, 0);
    cp_commit();
    int it = 0;
    for (int j = z; j < nsp; j += zstep, it++) {
        const int b = PF_ ? (it & 1) : 0;
        if (!PF_) {
            __syncthreads();                                  // the last span is done with
            load(j, 0);
            cp_commit();
        }
        cp_wait_all();
        __syncthreads();                                      // span j landed; j - zstep done
        if (PF_ && j + zstep < nsp) load(j + zstep, b ^ 1);
        if (PF_) cp_commit();
        const int k0 = j * SPAN;
        if (k0 > wpmax) continue;                             // warp-uniform: no row reaches j
        const bf16* kb = ks + b * SPAN * HD;
        const bf16* vb = vs + b * SPAN * HD;
        const bf16* qw = qs + w0 * HD;
        const bf16* qwl = ql + w0 * HD;
        if (dec) {
            dec_span(qw, qwl, kb, vb, k0, p0, p1, scale, split, j, NS, wa, wb, M, L, A, sm, sl, sa,
                     pm, Ps, Qs);
            continue;
        }
        // (1) raw scores: each s[nt] gets the d chunks 0, 1, .., HD/16 - 1 in order
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int dp = 0; dp < HD / 32; dp++) {                // d chunks 2dp, 2dp + 1
            unsigned qa[2][4], qb[2][4];
            q_frags(qa, qb, qw, qwl, dp, lane);
#pragma unroll
            for (int nt = 0; nt < 8; nt++) score_steps(s[nt], qa, qb, kb, nt, dp, lane);
        }
        // (2)-(5)
        unsigned Pw[8][2], Qw[8][2];
        float m0, m1, l0, l1;
        if (__all_sync(FULL, k0 + SPAN - 1 <= min(p0, p1)))   // below the diagonal: no masks
            span_softmax<false>(s, p0, p1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        else
            span_softmax(s, p0, p1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        // (6) acc = P V: each acc[dt] gets the key chunks 0..3 in order
        float acc[NC][4];
#pragma unroll
        for (int dt = 0; dt < NC; dt++) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
#pragma unroll
            for (int dp = 0; dp < NC / 2; dp++) {             // d tiles 2dp, 2dp + 1
                unsigned vf[4];
                ldsm4t(vf, smem_u32(vb + sw(16 * kc + (lane & 7) + 8 * ((lane >> 3) & 1),
                                            2 * dp + (lane >> 4))));
                mma(acc[2 * dp], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0],
                    Pw[2 * kc + 1][1], vf[0], vf[1]);
                mma(acc[2 * dp], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0],
                    Qw[2 * kc + 1][1], vf[0], vf[1]);
                mma(acc[2 * dp + 1], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0],
                    Pw[2 * kc + 1][1], vf[2], vf[3]);
                mma(acc[2 * dp + 1], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0],
                    Qw[2 * kc + 1][1], vf[2], vf[3]);
            }
        }
        // (7) rows with a key in this span: fold here, or hand the state on (split, >= 2 spans)
        span_end<NC>(acc, 0, t == 0, k0, p0, p1, m0, m1, l0, l1, split, j, NS, wa, wb, M, L, A,
                     sm, sl, sa, t);
    }
    cp_wait_all();
    if (split) {
        // the last of the tile's blocks to finish folds its rows of two spans or more, spans
        // 0, 1, 2, ... in order from the scratch (the others' states are visible after the
        // fence and the count); it leaves the count at 0 for the next launch
        __shared__ int last;
        __threadfence();
        __syncthreads();
        if (tid == 0) {
            int* c = count + blockIdx.x * KV + kvh;
            last = atomicAdd(c, 1) == min((int)gridDim.z, max(nsp, 1)) - 1;
            if (last) *c = 0;
        }
        __syncthreads();
        if (last) {
            __threadfence();
            for (int pr = warp; pr < npairs; pr += 4) {
                const int p = pos[r0 + pr / G];
                if (p < SPAN) continue;
                const long long w = (long long)(r0 + pr / G) * NQ + kvh * G + pr % G;
                float Mx = NEG_INF, Lx = 0.f, Ax[HD / 32];
#pragma unroll
                for (int c = 0; c < HD / 32; c++) Ax[c] = 0.f;
                for (int j = 0; j <= p / SPAN; j++) {
                    const long long st = w * NS + j;
                    float mn, ca, cb;
                    fold_scales(Mx, __ldcg(sm + st), mn, ca, cb);
                    Lx = fold_el(Lx, __ldcg(sl + st), ca, cb);
#pragma unroll
                    for (int c = 0; c < HD / 32; c++)
                        Ax[c] = fold_el(Ax[c], __ldcg(sa + st * HD + lane + 32 * c), ca, cb);
                    Mx = mn;
                }
#pragma unroll
                for (int c = 0; c < HD / 32; c++)
                    out[w * HD + out_at1(lane + 32 * c)] = (bf16)(pack_bf16(out_el(Ax[c], Lx), 0.f) & 0xffffu);
            }
        }
        if (z != 0) return;
    }
    // rows of one span (every row in-block; split: those and padding, by the span-0 block)
    if (dec) {                                                // d tiles NCW w .. NCW w + NCW - 1
        if (pa < npairs && !(split && p0 >= SPAN)) finish<NCW>(A, L[0], 0, t, p0 < 0, out + wa * HD, NCW * warp);
        if (pb < npairs && !(split && p1 >= SPAN)) finish<NCW>(A, L[1], 1, t, p1 < 0, out + wb * HD, NCW * warp);
        return;
    }
    if (pa < npairs && !(split && p0 >= SPAN)) finish<NC>(A, L[0], 0, t, p0 < 0, out + wa * HD);
    if (pb < npairs && !(split && p1 >= SPAN)) finish<NC>(A, L[1], 1, t, p1 < 0, out + wb * HD);
}
"""

# The definition, for the tests: one warp a (row, q head) of one chunk, the query alone in
# m-row 0 (rows 1..15 of A are zero), K and V read straight through the table (0 past p).
_REF_SRC = _MMA + r"""
extern "C" __global__ void __launch_bounds__(32) reference(
        const float* q, const bf16* kp, const bf16* vp, const int* table, int P, int start,
        int NQ, int KV, float scale, bf16* out) {
    const int r = blockIdx.x, h = blockIdx.y, lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int G = NQ / KV, kvh = h / G, p = start + r;
    const float* qr = q + ((long long)r * NQ + h) * HD;
    unsigned qa[HD / 16][4], qb[HD / 16][4];               // q's high bf16, and the rest
#pragma unroll
    for (int dc = 0; dc < HD / 16; dc++) {
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const float x = qr[16 * dc + 8 * e + 2 * t], y = qr[16 * dc + 8 * e + 2 * t + 1];
            const unsigned hw = pack_bf16(x, y);
            qa[dc][2 * e] = g == 0 ? hw : 0u;
            qb[dc][2 * e] = g == 0 ? rest_bf16(x, y, hw) : 0u;
            qa[dc][2 * e + 1] = qb[dc][2 * e + 1] = 0u;
        }
    }
    auto at = [&](int key, int d) -> long long {
        return (((long long)table[key / P] * P + key % P) * KV + kvh) * HD + d;
    };
    auto kword = [&](int key, int d) -> unsigned {        // K[key][d, d + 1], 0 past p
        return key <= p ? *(const unsigned*)(kp + at(key, d)) : 0u;
    };
    auto vword = [&](int key, int d) -> unsigned {        // V[key][d], V[key + 1][d], 0 past p
        const unsigned lo = key <= p ? vp[at(key, d)] : 0u;
        const unsigned hi = key + 1 <= p ? vp[at(key + 1, d)] : 0u;
        return lo | (hi << 16);
    };
    const int p0 = g == 0 ? p : -1;
    float M = NEG_INF, L = 0.f, A[NC][4];
#pragma unroll
    for (int dt = 0; dt < NC; dt++) A[dt][0] = A[dt][1] = A[dt][2] = A[dt][3] = 0.f;
    for (int j = 0; j <= p / SPAN; j++) {
        const int k0 = j * SPAN;
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) {
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
            const int key = k0 + 8 * nt + g;               // B column g of tile nt
#pragma unroll
            for (int dc = 0; dc < HD / 16; dc++) {
                const unsigned b0 = kword(key, 16 * dc + 2 * t), b1 = kword(key, 16 * dc + 8 + 2 * t);
                mma(s[nt], qa[dc][0], qa[dc][1], qa[dc][2], qa[dc][3], b0, b1);
                mma(s[nt], qb[dc][0], qb[dc][1], qb[dc][2], qb[dc][3], b0, b1);
            }
        }
        unsigned Pw[8][2], Qw[8][2];
        float m0, m1, l0, l1;
        span_softmax(s, p0, -1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        float acc[NC][4];
#pragma unroll
        for (int dt = 0; dt < NC; dt++) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
            const int key = k0 + 16 * kc + 2 * t;          // B rows 2t, 2t + 1 (b0), + 8 (b1)
#pragma unroll
            for (int dt = 0; dt < NC; dt++) {
                const unsigned b0 = vword(key, 8 * dt + g), b1 = vword(key + 8, 8 * dt + g);
                mma(acc[dt], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0], Pw[2 * kc + 1][1], b0, b1);
                mma(acc[dt], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0], Qw[2 * kc + 1][1], b0, b1);
            }
        }
        if (g == 0) fold<NC>(M, L, A, 0, m0, l0, acc);
    }
    if (g == 0) finish<NC>(A, L, 0, t, false, out + ((long long)r * NQ + h) * HD);
}
"""


class RoundMap:
    """Where each row of a round reads and writes its KV rows, as device int32 arrays.

    tables [S, W]: chunk c's page ids (padded with 0); slot [T]: the chunk of each row;
    pos [T]: each row's position (-1: padding); tiles: (first row, rows) of each tile."""

    def __init__(self, tables, slot, pos, tile_row, tile_n, page_rows):
        self.tables, self.slot, self.pos = tables, slot, pos
        self.tile_row, self.tile_n, self.page_rows = tile_row, tile_n, page_rows

    @property
    def width(self) -> int:
        return self.tables.shape[1]


def host_map(chunks, group, width=None):
    """numpy arrays for a RoundMap of chunks [(table, page_rows, start, ids, want_logits)]
    (server/engine/rows.py's RoundChunk, or a plain tuple in its order)."""
    qt = max(1, PAIRS // group)
    W = width or max(len(c[0]) for c in chunks)          # c[0]: the table
    tables = np.zeros((len(chunks), W), dtype=np.int32)
    slot, pos, trow, tn, keys = [], [], [], [], []
    row = 0
    for ci, (table, _, start, ids, *_) in enumerate(chunks):
        tables[ci, :len(table)] = table
        n = len(ids)
        slot += [ci] * n
        pos += range(start, start + n)
        for a in range(0, n, qt):
            trow.append(row + a)
            tn.append(min(qt, n - a))
            keys.append(start + a + tn[-1])             # the most keys a row of the tile reads
        row += n
    i32 = lambda a: np.asarray(a, dtype=np.int32)
    # Tiles with the most keys first: blocks start in grid order, so a causal prefill's long
    # tiles no longer form the launch's last wave (scheduling only: a tile's bytes do not
    # depend on its block)
    order = np.argsort(-np.asarray(keys, dtype=np.int64), kind="stable")
    return tables, i32(slot), i32(pos), i32(trow)[order], i32(tn)[order]


def round_map(chunks, group, pos=None, width=None) -> RoundMap:
    t, s, p, tr, tn = host_map(chunks, group, width)
    d = cp.asarray
    return RoundMap(d(t), d(s), d(p) if pos is None else pos, d(tr), d(tn), chunks[0][1])  # page_rows


def plan(T, hq, hd, kv, n_tiles, keys):
    """(split, Z, spans) of a launch, from shapes only: `keys` = W x P, the most keys a row
    of this map can have. Scheduling only: both modes give the same bytes."""
    spans = -(-keys // SPAN)
    blocks = n_tiles * kv
    split = spans >= 2 and blocks < SPLIT_BLOCKS and T * hq * spans * (hd + 2) * 4 <= SCRATCH_MAX
    if FORCE_SPLIT is not None:
        split = bool(FORCE_SPLIT) and spans >= 2
    z = min(spans, max(1, -(-SPLIT_TARGET // max(1, blocks)))) if split else 1
    return split, z, spans


_COUNTS = {}


def _counts(n: int):
    """Split mode's per-(tile, kv head) finish counts: at least n int32 on this device, zeroed
    once and left at zero by every launch (so CUDA graphs replay without a memset). Grown
    outside captures only; older buffers are kept (graphs may point into them)."""
    dev = cp.cuda.Device().id
    have = _COUNTS.get(dev, [])
    if not have or have[-1].size < n:
        if cp.cuda.get_current_stream().is_capturing():
            raise RuntimeError("attention: split counts grown inside a graph capture (run once eagerly first)")
        size = max(n, SPLIT_BLOCKS)
        mem = cp.cuda.Memory(size * 4)                  # its own allocation, outside any pool
        cp.cuda.runtime.memset(mem.ptr, 0, size * 4)
        have.append(cp.ndarray((size,), cp.int32, cp.cuda.MemoryPointer(mem, 0)))
        _COUNTS[dev] = have
    return have[-1]


def _smem(hd: int) -> int:
    return (2 * PAIRS + 4 * SPAN) * hd * 2        # q (high, rest), K and V of two spans: bf16


def cuda_round(q, k_pool, v_pool, rmap: RoundMap, scale, pi: bool = False):
    # q: [T, Hq, hd] float32 contiguous; pools [pages, P, KV, hd] bf16 -> [T, Hq, hd] bf16
    # (pi: each 32-element chunk of a row in pi order, for matmul_cuda's TMA GEMM)
    T, hq, hd = q.shape
    kv = k_pool.shape[2]
    if hd not in HEAD_DIMS:
        raise NotImplementedError(f"GPU attention is built for head dims {HEAD_DIMS}, not {hd}; "
                                  "run this model with --device cpu")
    if hq // kv > PAIRS:
        raise NotImplementedError(f"GPU attention serves up to {PAIRS} q heads a kv head, not {hq // kv}")
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((T, hq, hd), dtype=BF16)
    n_tiles = rmap.tile_row.shape[0]
    if not n_tiles:
        return out
    split, z, spans = plan(T, hq, hd, kv, n_tiles, rmap.width * rmap.page_rows)
    if split:
        sm = cp.empty((T * hq * spans,), dtype=cp.float32)
        sl = cp.empty_like(sm)
        sa = cp.empty((T * hq * spans * hd,), dtype=cp.float32)
    else:
        sm = sl = sa = cp.empty((1,), dtype=cp.float32)
    fn = kernel(_SRC, "attend", (f"HD={hd}", f"PF_={int(PREFETCH)}", f"PI_={int(pi)}"), smem=_smem(hd))
    launch(fn, (n_tiles, kv, z), (128,), (q, k_pool, v_pool, rmap.tables, cp.int32(rmap.width),
                                          rmap.slot, rmap.pos, rmap.tile_row, rmap.tile_n,
                                          cp.int32(rmap.page_rows), cp.int32(hq), cp.int32(kv),
                                          cp.int32(hq // kv), cp.float32(scale), out,
                                          cp.int32(int(split)), cp.int32(spans), sm, sl, sa,
                                          _counts(n_tiles * kv)), shared_mem=_smem(hd))
    return out


def reference(q, k_pool, v_pool, table, page_rows, start, scale):
    """The definition kernel (tests): rows start .. start+n-1 of one stream, each (row, head)
    alone in m-row 0 of its own warp's mma. Same signature as `cuda`."""
    n, hq, hd = q.shape
    kv = k_pool.shape[2]
    q = cp.ascontiguousarray(q, dtype=cp.float32)
    out = cp.empty((n, hq, hd), dtype=BF16)
    t = cp.asarray(np.asarray(table, dtype=np.int32))
    kernel(_REF_SRC, "reference", (f"HD={hd}",))((n, hq), (32,), (
        q, k_pool, v_pool, t, cp.int32(page_rows), cp.int32(start), cp.int32(hq), cp.int32(kv),
        cp.float32(scale), out))
    return out


def cuda(q, k_pool, v_pool, table, page_rows, start, scale):
    # the reference's signature: one chunk of rows start .. start+n-1 of one stream
    chunk = (tuple(table), page_rows, start, range(q.shape[0]))
    group = q.shape[1] // k_pool.shape[2]
    return cuda_round(q, k_pool, v_pool, round_map([chunk], group), scale)
