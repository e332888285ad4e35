// Decode GEMV/GEMM over GGUF blocks kept as stored (planes, qblocks.cuh), and their dequantize
// kernels. Compiled by kernels/qmatmul_cuda.py with common_cuda.HEADER in front and
// -DQK=<type> -DS_=<ranges> -DMT=.. -DNT=.. -DU_=..
//
// The arithmetic is matmul_cuda.definition's on the dequantized bf16 weights (qblocks.cuh):
// K in chunks of 32 (lane t of a quad holds k 8t .. 8t+7; two mma m16n8k16 a chunk, x's words
// and W's words paired as in the definition), chunks in S_ ranges, each range summed from 0 in
// chunk order, ranges folded (((0 + r0) + r1) + ...) and bias added last. Which warp or block
// computes a range, and how many rows or columns share a launch, is scheduling only: an output
// element's bytes depend on its x row, its weight row and K alone (solo == concurrent).
#include "qblocks.cuh"
#include "matmul_mma.cuh"
#ifndef PF_G
#define PF_G 1
#endif
#ifndef CV
#define CV 1
#endif

__device__ __forceinline__ void chunk(float* d, const uint4& xl, const uint4& xh, const uint4& w) {
    mma(d, xl.x, xh.x, xl.y, xh.y, w.x, w.y);
    mma(d, xl.z, xh.z, xl.w, xh.w, w.z, w.w);
}
__device__ __forceinline__ uint4 xrow8(const bf16* x, int m, int M, long long ldx, int k) {
    if (m >= M) return make_uint4(0, 0, 0, 0);
    return __ldg((const uint4*)(x + (long long)m * ldx + k));
}
__device__ __forceinline__ int range_lo(int q, int nch) { return (int)((long long)q * nch / S_); }

// CV = 1: a warp's groups glo .. ghi - 1 of 8 chunks (L: its rows' lane views at group glo,
// cur: that group's raw bytes, both from the caller), weights by fconv_u. HI = false where the
// tile's rows 8..15 are all past M: their x is zeros, as xrow8 gives them. Other rows past M
// read x row M - 1 and columns past N weight row N - 1 (qrow's clamp): a row of the mma's A
// only meets its own output row and a column of B its own output column, and those are never
// written. So the same mma calls give every written output the CV = 0 loop's operands.
template <bool HI>
__device__ __forceinline__ void groups(float (&acc)[MT][NT][4], QRow (&L)[NT], Raw (&cur)[NT],
                                       const bf16* __restrict__ x, long long ldx, int M, int m0,
                                       int g, int t, int glo, int ghi) {
    const uint4* xa[MT];
    const uint4* xb[MT];
#pragma unroll
    for (int i = 0; i < MT; i++) {
        const int m = m0 + 16 * i + g;
        xa[i] = (const uint4*)(x + (long long)min(m, M - 1) * ldx + 256 * glo + 8 * t);
        xb[i] = (const uint4*)(x + (long long)min(m + 8, M - 1) * ldx + 256 * glo + 8 * t);
    }
    for (int gi = glo; gi < ghi; gi++) {
        Raw nxt[NT];
        if (PF_G && gi + 1 < ghi) {
#pragma unroll
            for (int j = 0; j < NT; j++) { nxt[j] = load_l(L[j]); step_l(L[j]); }
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            uint4 w[NT];
#pragma unroll
            for (int j = 0; j < NT; j++) w[j] = fconv_u(cur[j], u, t);
#pragma unroll
            for (int i = 0; i < MT; i++) {
                const uint4 xl = __ldg(xa[i] + 4 * u);
                const uint4 xh = HI ? __ldg(xb[i] + 4 * u) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int j = 0; j < NT; j++) chunk(acc[i][j], xl, xh, w[j]);
            }
        }
#pragma unroll
        for (int i = 0; i < MT; i++) { xa[i] += 32; xb[i] += 32; }
        if (gi + 1 < ghi) {
#pragma unroll
            for (int j = 0; j < NT; j++) {
                if (PF_G) cur[j] = nxt[j];
                else { cur[j] = load_l(L[j]); step_l(L[j]); }
            }
        }
    }
}

// grid (ceil(N / (8 NT)), ceil(M / (16 MT))), 32 S_ threads, dynamic shared memory
// S_ MT NT 128 floats. Warp q sums K range q of the block's NT groups of 8 columns for its MT
// tiles of 16 rows: where its range is whole groups of 8 chunks, a group's weights unpacked by
// unpack_g before their mma, else U_ chunks at a time by unpack8; the S_ partial
// sums are folded in order from 0.f by all threads. out [M, ldo] float32 (a column slice of a
// wider output: out points at its first column). N % 8 == 0, K % 32 == 0, x rows ldx apart.
// With CV = 1 the group path is `groups` (fconv_u; the first group's weights read before
// pdl_wait); MINB: __launch_bounds__'s minimum blocks per SM (registers; scheduling only).
#ifndef MINB
#define MINB 1
#endif
extern "C" __global__ void __launch_bounds__(32 * S_, MINB)
qgemv(const bf16* __restrict__ x, long long ldx, const unsigned char* p0, const unsigned char* p1,
      const unsigned char* p2, const unsigned char* p3, const bf16* __restrict__ bias,
      float* __restrict__ out, long long ldo, int M, int N, int K) {
    extern __shared__ float part[];                        // [S_][MT][NT][32 lanes][4]
    const QPlanes P = {p0, p1, p2, p3};
    pdl_trigger();
    const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 8 * NT, m0 = blockIdx.y * 16 * MT, nch = K / 32;
    const int lo = range_lo(q, nch), hi = range_lo(q + 1, nch);
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;
    if (lo % 8 == 0 && hi % 8 == 0 && lo < hi) {
        // groups of 8 chunks (K % 2048 == 0: every range whole groups): row pointers hoisted,
        // each group's planes in the widest loads (unpack_g), the same weights as unpack8
        QRow R[NT];
#pragma unroll
        for (int j = 0; j < NT; j++) R[j] = qrow(P, min(n0 + 8 * j + g, N - 1), K);
#if CV
        // the first group's weights are read before the wait (weights only: never written)
        QRow L[NT];
        Raw cur[NT];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            L[j] = lane_row(R[j], t);
            for (int s = 0; s < lo / 8; s++) step_l(L[j]);
            cur[j] = load_l(L[j]);
            step_l(L[j]);
        }
        pdl_wait();
        if (MT == 1 && M - m0 <= 8) groups<false>(acc, L, cur, x, ldx, M, m0, g, t, lo / 8, hi / 8);
        else groups<true>(acc, L, cur, x, ldx, M, m0, g, t, lo / 8, hi / 8);
#elif PF_G
        pdl_wait();
        // group gi + 1's loads go out before group gi's arithmetic
        Raw cur[NT];
#pragma unroll
        for (int j = 0; j < NT; j++) cur[j] = load_g(R[j], lo / 8, t);
        for (int gi = lo / 8; gi < hi / 8; gi++) {
            Raw nxt[NT];
            if (gi + 1 < hi / 8) {
#pragma unroll
                for (int j = 0; j < NT; j++) nxt[j] = load_g(R[j], gi + 1, t);
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int k = 32 * (8 * gi + u) + 8 * t;
                uint4 w[NT];
#pragma unroll
                for (int j = 0; j < NT; j++)
                    w[j] = n0 + 8 * j + g < N ? conv_u(cur[j], u, t) : make_uint4(0, 0, 0, 0);
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    const uint4 xl = xrow8(x, m0 + 16 * i + g, M, ldx, k);
                    const uint4 xh = xrow8(x, m0 + 16 * i + g + 8, M, ldx, k);
#pragma unroll
                    for (int j = 0; j < NT; j++) chunk(acc[i][j], xl, xh, w[j]);
                }
            }
#pragma unroll
            for (int j = 0; j < NT; j++) cur[j] = nxt[j];
        }
#else
        pdl_wait();
        for (int gi = lo / 8; gi < hi / 8; gi++) {
            uint4 w[NT][8];
#pragma unroll
            for (int j = 0; j < NT; j++) {
                unpack_g(R[j], gi, t, w[j]);
                if (n0 + 8 * j + g >= N)
#pragma unroll
                    for (int u = 0; u < 8; u++) w[j][u] = make_uint4(0, 0, 0, 0);
            }
#pragma unroll
            for (int u = 0; u < 8; u++) {
                const int k = 32 * (8 * gi + u) + 8 * t;
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    const uint4 xl = xrow8(x, m0 + 16 * i + g, M, ldx, k);
                    const uint4 xh = xrow8(x, m0 + 16 * i + g + 8, M, ldx, k);
#pragma unroll
                    for (int j = 0; j < NT; j++) chunk(acc[i][j], xl, xh, w[j][u]);
                }
            }
        }
#endif
    } else {
    pdl_wait();
    for (int c0 = lo; c0 < hi; c0 += U_) {
        uint4 w[U_][NT];
#pragma unroll
        for (int u = 0; u < U_; u++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const int n = n0 + 8 * j + g;
                w[u][j] = (c0 + u < hi && n < N) ? unpack8(P, n, c0 + u, t, K) : make_uint4(0, 0, 0, 0);
            }
#pragma unroll
        for (int u = 0; u < U_; u++) {
            if (c0 + u < hi) {
                const int k = 32 * (c0 + u) + 8 * t;
#pragma unroll
                for (int i = 0; i < MT; i++) {
                    const uint4 xl = xrow8(x, m0 + 16 * i + g, M, ldx, k);
                    const uint4 xh = xrow8(x, m0 + 16 * i + g + 8, M, ldx, k);
#pragma unroll
                    for (int j = 0; j < NT; j++) chunk(acc[i][j], xl, xh, w[u][j]);
                }
            }
        }
    }
    }
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++)
                part[((((q * MT + i) * NT + j) * 32) + lane) * 4 + r] = acc[i][j][r];
    __syncthreads();
    // fold: one thread an output value slot (i, j, lane, r), ranges in order from 0.f
    for (int e = threadIdx.x; e < MT * NT * 128; e += 32 * S_) {
        const int r = e & 3, l = (e >> 2) & 31, j = (e >> 7) % NT, i = (e >> 7) / NT;
        float tot = 0.f;
        for (int s = 0; s < S_; s++) tot = __fadd_rn(tot, part[s * MT * NT * 128 + e]);
        const int m = m0 + 16 * i + (l >> 2) + 8 * (r >> 1), n = n0 + 8 * j + 2 * (l & 3) + (r & 1);
        if (m < M && n < N) out[(long long)m * ldo + n] = bias ? tot + b2f(bias[n]) : tot;
    }
}

// The definition in plain form: one warp a 16 x 8 tile, each range's chunks in order, every
// weight unpacked by the same unpack8; ranges folded in order. (matmul_cuda.definition's loop.)
extern "C" __global__ void qdefinition(const bf16* x, const unsigned char* p0, const unsigned char* p1,
                                       const unsigned char* p2, const unsigned char* p3,
                                       const bf16* bias, float* C, int M, int N, int K) {
    const QPlanes P = {p0, p1, p2, p3};
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 16, nch = K / 32;
    float tot[4] = {0.f, 0.f, 0.f, 0.f};
    for (int q = 0; q < S_; q++) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int c = range_lo(q, nch); c < range_lo(q + 1, nch); c++) {
            const int k = 32 * c + 8 * t;
            const uint4 xl = xrow8(x, m0 + g, M, K, k), xh = xrow8(x, m0 + g + 8, M, K, k);
            const uint4 w = n0 + g < N ? unpack8(P, n0 + g, c, t, K) : make_uint4(0, 0, 0, 0);
            chunk(acc, xl, xh, w);
        }
        for (int r = 0; r < 4; r++) tot[r] = __fadd_rn(tot[r], acc[r]);
    }
    for (int r = 0; r < 4; r++) {
        const int m = m0 + g + 8 * (r >> 1), n = n0 + 2 * t + (r & 1);
        if (m < M && n < N) C[(long long)m * N + n] = bias ? tot[r] + b2f(bias[n]) : tot[r];
    }
}

// Dequantize to bf16: plain [N, K] (tests, the CPU's cross-check), or straight into
// matmul_cuda.Packed's order (prefill: the tensor-core GEMMs read it as they read the bf16
// path's weights). One thread a (row, chunk, quad lane): 8 weights; N % 8 == 0. Packed: data[N8][KC][4][8][4][2]
// (piece i holds natural word 4t + i of row g at word position 4 (8 i + g) + t); rows of this
// matrix start at Packed row `row0` (a multiple of 8: q|k|v, gate|up of mixed types).
extern "C" __global__ void qdequant(const unsigned char* p0, const unsigned char* p1, const unsigned char* p2,
                                    const unsigned char* p3, unsigned* __restrict__ out, int N, int K,
                                    int packed, int row0, int KC) {
    const QPlanes P = {p0, p1, p2, p3};
    const long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int nch = K / 32;
    if (e >= (long long)N * nch * 4) return;
    // thread (row group n / 8, chunk c, row g, lane t): a warp writes one whole Packed tile,
    // each of its four stores 128 contiguous bytes
    const int t = (int)(e & 3), g = (int)((e >> 2) & 7);
    const long long rest = e >> 5;
    const int c = (int)(rest % nch), n = 8 * (int)(rest / nch) + g;
    const uint4 w = unpack8(P, n, c, t, K);
    if (!packed) {
        uint4* o = (uint4*)(out + ((long long)n * K + 32 * c + 8 * t) / 2);
        *o = w;
        return;
    }
    const int r = row0 + n, n8 = r >> 3;
    unsigned* tile = out + ((long long)n8 * KC + c) * 128;        // 512 bytes = 128 words
    // natural word 4t + i (k pair 8t + 2i) -> piece i, row g, word t
    tile[(0 * 8 + g) * 4 + t] = w.x;
    tile[(1 * 8 + g) * 4 + t] = w.y;
    tile[(2 * 8 + g) * 4 + t] = w.z;
    tile[(3 * 8 + g) * 4 + t] = w.w;
}

// Embedding rows: out[r, :] = row ids[r] of the matrix, dequantized (bf16) and widened to
// float32: the bytes common_cuda.rows_of gives from the bf16 table. One thread a (row, chunk,
// quad lane).
extern "C" __global__ void qrows(const unsigned char* p0, const unsigned char* p1,
                                 const unsigned char* p2, const unsigned char* p3,
                                 const int* __restrict__ ids, float* __restrict__ out, int T, int K) {
    const QPlanes P = {p0, p1, p2, p3};
    const long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const int nch = K / 32;
    if (e >= (long long)T * nch * 4) return;
    const int t = (int)(e & 3), c = (int)((e >> 2) % nch), r = (int)((e >> 2) / nch);
    const uint4 w = unpack8(P, ids[r], c, t, K);
    float4* o = (float4*)(out + (long long)r * K + 32 * c + 8 * t);
    o[0] = make_float4(__uint_as_float(w.x << 16), __uint_as_float(w.x & 0xffff0000u),
                       __uint_as_float(w.y << 16), __uint_as_float(w.y & 0xffff0000u));
    o[1] = make_float4(__uint_as_float(w.z << 16), __uint_as_float(w.z & 0xffff0000u),
                       __uint_as_float(w.w << 16), __uint_as_float(w.w & 0xffff0000u));
}
