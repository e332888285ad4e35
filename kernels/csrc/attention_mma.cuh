
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
