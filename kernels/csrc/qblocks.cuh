// GGUF quantized blocks on the device: the unpack of one lane's 8 consecutive weights.
//
// A matrix [N, K] of one GGML type is kept as the file's bytes, regrouped per row into planes
// (structure of arrays: the same bytes, aligned so a lane's 8 weights are one 8-byte load;
// kernels/qmatmul_cuda.py `upload` makes them from a Blocks):
//   Q8_0: p0 int8 qs [N, K]        p2 half d [N, K/32]
//   Q4_0: p0 qs [N, K/2]           p2 half d [N, K/32]
//   Q4_1: p0 qs [N, K/2]           p2 half2 (d, m) [N, K/32]
//   Q4_K: p0 qs [N, K/2]           p1 header [N, K/256, 16]: half d, half dmin, 12 scale bytes
//   Q6_K: p0 ql [N, K/2]           p1 qh [N, K/4]    p3 int8 scales [N, K/16]   p2 half d [N, K/256]
// `unpack8` gives weights k = 32c + 8t .. 32c + 8t + 7 of row n as bf16 pairs (natural order,
// word i = k pair 2i, 2i + 1): each weight is gguf's float32 dequantization (the same operations
// in the same order as gguf.quants' numpy code: Q8_0 q d; Q4_0 d (q - 8); Q4_1 (d q) + m;
// Q4_K (d sc) q - (dmin m); Q6_K (d sc) (q - 32), each product and sum rounded on its own;
// the product d q of Q4_1 and Q4_K is taken as fma(d, 2^23 + q, -2^23 d), exact and rounded once:
// the same number, and the same bits but for the sign of a zero from a negative d, which
// llama.cpp never writes for these types)
// rounded to bf16 to nearest even: exactly what the bf16 path keeps on the device for the same
// file, so every GEMM over these weights is matmul_cuda.definition on those bf16 weights.
#pragma once

#ifndef QK
#define QK 0
#endif
#define Q8_0 1
#define Q4_0 2
#define Q4_1 3
#define Q4_K 4
#define Q6_K 5

struct QPlanes {
    const unsigned char* p0;
    const unsigned char* p1;
    const unsigned char* p2;
    const unsigned char* p3;
};

__device__ __forceinline__ float h2f(unsigned short h) {
    float f;
    asm("{ cvt.f32.f16 %0, %1; }" : "=f"(f) : "h"(h));
    return f;
}
// two floats to a bf16 pair, each rounded to nearest even (one instruction; == f2b for every
// number and infinity; a NaN weight, which only a NaN or infinite scale in a file can make,
// comes out as another NaN)
#ifndef BP_INT
#define BP_INT 0
#endif
__device__ __forceinline__ unsigned bpair(float lo, float hi) {
#if BP_INT      // integer rounding (the same bits for numbers and infinities): a speed variant
    unsigned a = __float_as_uint(lo), b = __float_as_uint(hi);
    a += 0x7fffu + ((a >> 16) & 1u);
    b += 0x7fffu + ((b >> 16) & 1u);
    return __byte_perm(a, b, 0x7632);
#else
    unsigned r;
    asm("{ cvt.rn.bf16x2.f32 %0, %1, %2; }" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#endif
}
// an integer code 0 <= b < 2^23 as a float, exactly, without a conversion instruction
// (2^23 + b is exact in float32; `off` = 2^23 + o gives b - o, also exact for |o| < 2^8)
__device__ __forceinline__ float code(unsigned b, float off) {
    return __fsub_rn(__uint_as_float(0x4B000000u | b), off);
}
__device__ __forceinline__ uint2 ld8(const unsigned char* p) { return __ldg((const uint2*)p); }

// 2^23 + byte i of w, as float bits (one prmt)
__device__ __forceinline__ float magic(unsigned w, int i) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7650 + i));
}
// fl(d b) for a code b given as magic 2^23 + b: exact product, one rounding (see above)
__device__ __forceinline__ float dmul(float d, float nd23, float mg) { return __fmaf_rn(d, mg, nd23); }
__device__ __forceinline__ uint4 pack8(const float* v) {
    return make_uint4(bpair(v[0], v[1]), bpair(v[2], v[3]), bpair(v[4], v[5]), bpair(v[6], v[7]));
}
// Q4_K: sub-block s's (d sc, dmin m) from the 16-byte header (d, dmin, scales[12])
__device__ __forceinline__ unsigned hbyte(const uint4& h, int k) {   // scale byte k (0..11)
    const unsigned w = k < 4 ? h.y : k < 8 ? h.z : h.w;
    return (w >> (8 * (k & 3))) & 0xffu;
}
__device__ __forceinline__ void k_scale(const uint4& h, int s, float& D, float& M) {
    unsigned sc, mn;
    if (s < 4) { sc = hbyte(h, s) & 63; mn = hbyte(h, s + 4) & 63; }
    else { sc = (hbyte(h, s + 4) & 0xf) | ((hbyte(h, s - 4) >> 6) << 4);
           mn = (hbyte(h, s + 4) >> 4) | ((hbyte(h, s) >> 6) << 4); }
    D = __fmul_rn(h2f((unsigned short)(h.x & 0xffffu)), code(sc, 8388608.f));
    M = __fmul_rn(h2f((unsigned short)(h.x >> 16)), code(mn, 8388608.f));
}
// Q4_K / Q4_1: 8 nibbles (bits sh..sh+3 of each byte of q) -> fl(fl(D q) -/+ M) as bf16 pairs
template <bool SUB>
__device__ __forceinline__ uint4 nib_conv(uint2 q, int sh, float D, float M) {
    const unsigned a = (q.x >> sh) & 0x0f0f0f0fu, b = (q.y >> sh) & 0x0f0f0f0fu;
    const float nd = -__fmul_rn(D, 8388608.f);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const float p = dmul(D, nd, magic(i < 4 ? a : b, i & 3));
        v[i] = SUB ? __fsub_rn(p, M) : __fadd_rn(p, M);
    }
    return pack8(v);
}
__device__ __forceinline__ uint4 k_conv(uint2 q, int sh, float D, float M) { return nib_conv<true>(q, sh, D, M); }

// q: the 8 unsigned 4-bit (or 8-bit) codes, a, b: per-lane scale terms; the weight's formula
// by type (see above)
__device__ __forceinline__ uint4 unpack8(const QPlanes P, int n, int c, int t, int K) {
    const long long row = (long long)n;
#if QK == Q8_0
    const uint2 q = ld8(P.p0 + row * K + 32 * c + 8 * t);
    const float d = h2f(((const unsigned short*)P.p2)[row * (K / 32) + c]);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        // the byte with its sign bit flipped is b + 128
        const unsigned b = __byte_perm((i < 4 ? q.x : q.y) ^ 0x80808080u, 0, 0x4440 + (i & 3));
        v[i] = __fmul_rn(code(b, 8388736.f), d);
    }
    return pack8(v);
#elif QK == Q4_0 || QK == Q4_1
    // block c: weight i < 16 is the low nibble of qs[i], weight 16 + i the high one
    const uint2 q = ld8(P.p0 + row * (K / 2) + 16 * c + 8 * (t & 1));
    const int sh = 4 * (t >> 1);
#if QK == Q4_0
    const float d = h2f(((const unsigned short*)P.p2)[row * (K / 32) + c]);
#else
    const unsigned dm = ((const unsigned*)P.p2)[row * (K / 32) + c];
    const float d = h2f((unsigned short)(dm & 0xffffu)), m = h2f((unsigned short)(dm >> 16));
#endif
#if QK == Q4_1
    return nib_conv<false>(q, sh, d, m);
#else
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned b = ((i < 4 ? q.x : q.y) >> (8 * (i & 3) + sh)) & 0xfu;
        v[i] = __fmul_rn(d, code(b, 8388616.f));
    }
    return pack8(v);
#endif
#elif QK == Q4_K
    // super-block sb = c / 8, sub-block s = c % 8: weight l of s is nibble (s & 1) of
    // qs[32 (s / 2) + l]; scale and min 6 bits each from the 12 scale bytes
    const int sb = c >> 3, s = c & 7;
    const uint2 q = ld8(P.p0 + row * (K / 2) + 128 * sb + 32 * (s >> 1) + 8 * t);
    const uint4 hd = __ldg((const uint4*)(P.p1 + (row * (K / 256) + sb) * 16));
    float D, M;
    k_scale(hd, s, D, M);
    return k_conv(q, 4 * (s & 1), D, M);
#elif QK == Q6_K
    // super-block sb = c / 8, half h = (c % 8) / 4, chunk s = c % 4 of the half: weight l is
    // nibble (s / 2) of ql[64 h + 32 (s & 1) + l] with bits 2s, 2s + 1 of qh[32 h + l] above it
    const int sb = c >> 3, h = (c >> 2) & 1, s = c & 3;
    const uint2 ql = ld8(P.p0 + row * (K / 2) + 128 * sb + 64 * h + 32 * (s & 1) + 8 * t);
    const uint2 qh = ld8(P.p1 + row * (K / 4) + 64 * sb + 32 * h + 8 * t);
    const float d = h2f(((const unsigned short*)P.p2)[row * (K / 256) + sb]);
    const int scv = (int)((const signed char*)P.p3)[row * (K / 16) + 16 * sb + 2 * (c & 7) + (t >> 1)];
    const float D = __fmul_rn(d, (float)scv);
    const int shl = 4 * (s >> 1), shh = 2 * s;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned wl = i < 4 ? ql.x : ql.y, wh = i < 4 ? qh.x : qh.y;
        const unsigned b = ((wl >> (8 * (i & 3) + shl)) & 0xfu) | (((wh >> (8 * (i & 3) + shh)) & 3u) << 4);
        v[i] = __fmul_rn(D, code(b, 8388640.f));
    }
    return pack8(v);
#else
#error "QK: one of Q8_0, Q4_0, Q4_1, Q4_K, Q6_K"
#endif
}

// Groups of 8 chunks (256 weights of a row; a Q4_K / Q6_K super-block): one lane's 8
// fragments w[u] = unpack8(row, 8 g + u, t), with the row's plane pointers hoisted and each
// plane read in the widest loads its layout allows. Same operations per weight as unpack8.
struct QRow {
    const unsigned char* p0;
    const unsigned char* p1;
    const unsigned char* p2;
    const unsigned char* p3;
};
__device__ __forceinline__ QRow qrow(const QPlanes P, int n, int K) {
    const long long r = n;
    QRow R;
#if QK == Q8_0
    R.p0 = P.p0 + r * K; R.p1 = 0; R.p2 = P.p2 + r * (K / 16); R.p3 = 0;
#elif QK == Q4_0
    R.p0 = P.p0 + r * (K / 2); R.p1 = 0; R.p2 = P.p2 + r * (K / 16); R.p3 = 0;
#elif QK == Q4_1
    R.p0 = P.p0 + r * (K / 2); R.p1 = 0; R.p2 = P.p2 + r * (K / 8); R.p3 = 0;
#elif QK == Q4_K
    R.p0 = P.p0 + r * (K / 2); R.p1 = P.p1 + r * (K / 16); R.p2 = 0; R.p3 = 0;
#elif QK == Q6_K
    R.p0 = P.p0 + r * (K / 2); R.p1 = P.p1 + r * (K / 4); R.p2 = P.p2 + r * (K / 128);
    R.p3 = P.p3 + r * (K / 16);
#endif
    return R;
}
__device__ __forceinline__ unsigned half_of(const uint4& h, int u) {   // 16-bit word u (0..7)
    const unsigned w = u < 2 ? h.x : u < 4 ? h.y : u < 6 ? h.z : h.w;
    return (u & 1) ? (w >> 16) : (w & 0xffffu);
}
__device__ __forceinline__ unsigned word_of(const uint4& h, int u) {
    return u == 0 ? h.x : u == 1 ? h.y : u == 2 ? h.z : h.w;
}
__device__ __forceinline__ void unpack_g(const QRow R, int g, int t, uint4* w) {
#if QK == Q8_0
    const uint4 dv = __ldg((const uint4*)(R.p2 + 16 * g));
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const uint2 q = ld8(R.p0 + 256 * g + 32 * u + 8 * t);
        const float d = h2f((unsigned short)half_of(dv, u));
        const unsigned a = q.x ^ 0x80808080u, b = q.y ^ 0x80808080u;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fmul_rn(__fsub_rn(magic(i < 4 ? a : b, i & 3), 8388736.f), d);
        w[u] = pack8(v);
    }
#elif QK == Q4_0
    const uint4 dv = __ldg((const uint4*)(R.p2 + 16 * g));
    const int sh = 4 * (t >> 1);
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const uint2 q = ld8(R.p0 + 128 * g + 16 * u + 8 * (t & 1));
        const float d = h2f((unsigned short)half_of(dv, u));
        const unsigned a = (q.x >> sh) & 0x0f0f0f0fu, b = (q.y >> sh) & 0x0f0f0f0fu;
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fmul_rn(d, __fsub_rn(magic(i < 4 ? a : b, i & 3), 8388616.f));
        w[u] = pack8(v);
    }
#elif QK == Q4_1
    const uint4 d0 = __ldg((const uint4*)(R.p2 + 32 * g)), d1 = __ldg((const uint4*)(R.p2 + 32 * g + 16));
    const int sh = 4 * (t >> 1);
#pragma unroll
    for (int u = 0; u < 8; u++) {
        const uint2 q = ld8(R.p0 + 128 * g + 16 * u + 8 * (t & 1));
        const unsigned dm = word_of(u < 4 ? d0 : d1, u & 3);
        w[u] = nib_conv<false>(q, sh, h2f((unsigned short)(dm & 0xffffu)), h2f((unsigned short)(dm >> 16)));
    }
#elif QK == Q4_K
    const uint4 hd = __ldg((const uint4*)(R.p1 + 16 * g));
    uint2 q[4];
#pragma unroll
    for (int j = 0; j < 4; j++) q[j] = ld8(R.p0 + 128 * g + 32 * j + 8 * t);
#pragma unroll
    for (int s = 0; s < 8; s++) {
        float D, M;
        k_scale(hd, s, D, M);
        w[s] = k_conv(q[s >> 1], 4 * (s & 1), D, M);
    }
#elif QK == Q6_K
    uint2 ql[4], qh[2];
#pragma unroll
    for (int j = 0; j < 4; j++) ql[j] = ld8(R.p0 + 128 * g + 32 * j + 8 * t);   // (h, s & 1) = (j / 2, j % 2)
#pragma unroll
    for (int h = 0; h < 2; h++) qh[h] = ld8(R.p1 + 64 * g + 32 * h + 8 * t);
    const uint4 sv = __ldg((const uint4*)(R.p3 + 16 * g));
    const float d = h2f(((const unsigned short*)R.p2)[g]);
#pragma unroll
    for (int cc = 0; cc < 8; cc++) {
        const int h = cc >> 2, s = cc & 3;
        const unsigned sw = word_of(sv, cc >> 1);
        const int scv = ((int)(sw << (24 - 8 * (2 * (cc & 1) + (t >> 1))))) >> 24;
        const float D = __fmul_rn(d, (float)scv);
        const uint2 l = ql[2 * h + (s & 1)], hb = qh[h];
        const int shl = 4 * (s >> 1), shh = 2 * s;
        const unsigned a = ((l.x >> shl) & 0x0f0f0f0fu) | (((hb.x >> shh) & 0x03030303u) << 4);
        const unsigned b = ((l.y >> shl) & 0x0f0f0f0fu) | (((hb.y >> shh) & 0x03030303u) << 4);
        float v[8];
#pragma unroll
        for (int i = 0; i < 8; i++) v[i] = __fmul_rn(D, __fsub_rn(magic(i < 4 ? a : b, i & 3), 8388640.f));
        w[cc] = pack8(v);
    }
#endif
}

// The same group split in two: `load_g` issues a group's loads (raw bytes in registers), `conv_u`
// makes fragment u from them, so a kernel can load group g + 1 while it multiplies group g.
// conv_u(load_g(R, g, t), u, t) == unpack_g's w[u] (the same operations per weight).
struct Raw {
#if QK == Q4_K
    uint2 q[4]; uint4 h;
#elif QK == Q6_K
    uint2 l[4], hb[2]; uint4 h; unsigned d;
#elif QK == Q4_1
    uint2 q[8]; uint4 h, h2;
#else
    uint2 q[8]; uint4 h;
#endif
};
__device__ __forceinline__ Raw load_g(const QRow R, int g, int t) {
    Raw r;
#if QK == Q8_0
#pragma unroll
    for (int u = 0; u < 8; u++) r.q[u] = ld8(R.p0 + 256 * g + 32 * u + 8 * t);
    r.h = __ldg((const uint4*)(R.p2 + 16 * g));
#elif QK == Q4_0 || QK == Q4_1
#pragma unroll
    for (int u = 0; u < 8; u++) r.q[u] = ld8(R.p0 + 128 * g + 16 * u + 8 * (t & 1));
#if QK == Q4_0
    r.h = __ldg((const uint4*)(R.p2 + 16 * g));
#else
    r.h = __ldg((const uint4*)(R.p2 + 32 * g)); r.h2 = __ldg((const uint4*)(R.p2 + 32 * g + 16));
#endif
#elif QK == Q4_K
    r.h = __ldg((const uint4*)(R.p1 + 16 * g));
#pragma unroll
    for (int j = 0; j < 4; j++) r.q[j] = ld8(R.p0 + 128 * g + 32 * j + 8 * t);
#elif QK == Q6_K
#pragma unroll
    for (int j = 0; j < 4; j++) r.l[j] = ld8(R.p0 + 128 * g + 32 * j + 8 * t);
#pragma unroll
    for (int h = 0; h < 2; h++) r.hb[h] = ld8(R.p1 + 64 * g + 32 * h + 8 * t);
    r.h = __ldg((const uint4*)(R.p3 + 16 * g));
    r.d = ((const unsigned short*)R.p2)[g];
#endif
    return r;
}
__device__ __forceinline__ uint4 conv_u(const Raw& r, int u, int t) {
#if QK == Q8_0
    const float d = h2f((unsigned short)half_of(r.h, u));
    const unsigned a = r.q[u].x ^ 0x80808080u, b = r.q[u].y ^ 0x80808080u;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmul_rn(__fsub_rn(magic(i < 4 ? a : b, i & 3), 8388736.f), d);
    return pack8(v);
#elif QK == Q4_0
    const int sh = 4 * (t >> 1);
    const float d = h2f((unsigned short)half_of(r.h, u));
    const unsigned a = (r.q[u].x >> sh) & 0x0f0f0f0fu, b = (r.q[u].y >> sh) & 0x0f0f0f0fu;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmul_rn(d, __fsub_rn(magic(i < 4 ? a : b, i & 3), 8388616.f));
    return pack8(v);
#elif QK == Q4_1
    const unsigned dm = word_of(u < 4 ? r.h : r.h2, u & 3);
    return nib_conv<false>(r.q[u], 4 * (t >> 1), h2f((unsigned short)(dm & 0xffffu)), h2f((unsigned short)(dm >> 16)));
#elif QK == Q4_K
    float D, M;
    k_scale(r.h, u, D, M);
    return k_conv(r.q[u >> 1], 4 * (u & 1), D, M);
#elif QK == Q6_K
    const int h = u >> 2, s = u & 3;
    const unsigned sw = word_of(r.h, u >> 1);
    const int scv = ((int)(sw << (24 - 8 * (2 * (u & 1) + (t >> 1))))) >> 24;
    const float D = __fmul_rn(h2f((unsigned short)r.d), (float)scv);
    const uint2 l = r.l[2 * h + (s & 1)], hb = r.hb[h];
    const int shl = 4 * (s >> 1), shh = 2 * s;
    const unsigned a = ((l.x >> shl) & 0x0f0f0f0fu) | (((hb.x >> shh) & 0x03030303u) << 4);
    const unsigned b = ((l.y >> shl) & 0x0f0f0f0fu) | (((hb.y >> shh) & 0x03030303u) << 4);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmul_rn(D, __fsub_rn(magic(i < 4 ? a : b, i & 3), 8388640.f));
    return pack8(v);
#endif
}

// The GEMV's conversion (qgemv with CV = 1): conv_u's weights by fewer operations. For Q8_0,
// Q4_0 and Q6_K the code b goes into a float as 2^23 + 2^j b (one prmt: j = 8 for a byte,
// j = 16 for a code below 2^7) and the weight s (b - o) is one fma of the exact product:
// fma(s 2^-j, 2^23 + 2^j b, -(s 2^-j)(2^23 + 2^j o)), the last term exact (s's 11 or 19
// significant bits times those of 2^23 + 2^j o fit in 24), so the result is fl(s (b - o)),
// conv_u's number rounded once. Q4_K's scale and min are d sc, dmin m by the same exact fma as
// its weights, their 6-bit codes unpacked four at a time. The weights are conv_u's in every bit
// but the sign of a zero weight (+0 here where gguf's d (b - o) or d sc is -0 for a negative
// scale): a product with a zero weight is a zero, and a sum from +0.f of those and of nonzeros
// is the same number whatever their signs, so every output is the definition's (the tests
// compare the outputs byte for byte). Q4_1 is conv_u's own (already one prmt, one fma, one add).
__device__ __forceinline__ float magic16(unsigned w, int i) {   // 2^23 + 2^16 (byte i of w < 2^7)
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7044 + (i << 8)));
}
__device__ __forceinline__ float magic8(unsigned w, int i) {    // 2^23 + 2^8 (byte i of w)
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7404 + (i << 4)));
}
__device__ __forceinline__ uint4 fconv_u(const Raw& r, int u, int t) {
#if QK == Q8_0
    // s = d, j = 8, b = q + 128 (sign bit flipped), o = 128: 2^23 + 2^8 128 = 8421376 = 2^15 257
    const float d8 = __fmul_rn(h2f((unsigned short)half_of(r.h, u)), 0.00390625f);
    const float c = __fmul_rn(d8, 8421376.f);
    const unsigned a = r.q[u].x ^ 0x80808080u, b = r.q[u].y ^ 0x80808080u;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmaf_rn(d8, magic8(i < 4 ? a : b, i & 3), -c);
    return pack8(v);
#elif QK == Q4_0
    // s = d, j = 16, o = 8: 2^23 + 2^16 8 = 8912896 = 2^19 17
    const int sh = 4 * (t >> 1);
    const float d16 = __fmul_rn(h2f((unsigned short)half_of(r.h, u)), 1.52587890625e-05f);
    const float c = __fmul_rn(d16, 8912896.f);
    const unsigned a = (r.q[u].x >> sh) & 0x0f0f0f0fu, b = (r.q[u].y >> sh) & 0x0f0f0f0fu;
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmaf_rn(d16, magic16(i < 4 ? a : b, i & 3), -c);
    return pack8(v);
#elif QK == Q4_1
    return conv_u(r, u, t);
#elif QK == Q4_K
    // scale bytes 0..11 = h.y, h.z, h.w: sc_s, m_s (s < 4) = low 6 bits of bytes s, s + 4;
    // s >= 4: low / high nibble of byte s + 4 with the top 2 bits of byte s - 4 / s above them
    const unsigned sc = u < 4 ? r.h.y & 0x3f3f3f3fu : (r.h.w & 0x0f0f0f0fu) | ((r.h.y >> 2) & 0x30303030u);
    const unsigned mn = u < 4 ? r.h.z & 0x3f3f3f3fu : ((r.h.w >> 4) & 0x0f0f0f0fu) | ((r.h.z >> 2) & 0x30303030u);
    const float d = h2f((unsigned short)(r.h.x & 0xffffu)), dm = h2f((unsigned short)(r.h.x >> 16));
    const float D = dmul(d, -__fmul_rn(d, 8388608.f), magic(sc, u & 3));
    const float M = dmul(dm, -__fmul_rn(dm, 8388608.f), magic(mn, u & 3));
    return k_conv(r.q[u >> 1], 4 * (u & 1), D, M);
#elif QK == Q6_K
    // s = d sc (sc: the int8 scale, as 2^23 + (sc + 128) - (2^23 + 128)), j = 16, o = 32:
    // 2^23 + 2^16 32 = 10485760 = 2^21 5
    const int h = u >> 2, s = u & 3;
    const unsigned sw = word_of(r.h, u >> 1) ^ 0x80808080u;
    const float scf = __fsub_rn(__uint_as_float(__byte_perm(sw, 0x4B000000u, 0x7650 + 2 * (u & 1) + (t >> 1))), 8388736.f);
    const float D16 = __fmul_rn(__fmul_rn(h2f((unsigned short)r.d), 1.52587890625e-05f), scf);
    const float c = __fmul_rn(D16, 10485760.f);
    const uint2 l = r.l[2 * h + (s & 1)], hb = r.hb[h];
    const int shl = 4 * (s >> 1), shh = 2 * s;
    const unsigned a = ((l.x >> shl) & 0x0f0f0f0fu) | (((hb.x >> shh) & 0x03030303u) << 4);
    const unsigned b = ((l.y >> shl) & 0x0f0f0f0fu) | (((hb.y >> shh) & 0x03030303u) << 4);
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; i++) v[i] = __fmaf_rn(D16, magic16(i < 4 ? a : b, i & 3), -c);
    return pack8(v);
#endif
}

// A lane's view of a row's planes for the GEMV's group loop: lane_row folds the lane's offset
// into the pointers, load_l reads the group they point at (load_g's bytes, at immediate
// offsets), step_l moves them to the next group. load_l(lane_row(R, t) stepped g times) ==
// load_g(R, g, t).
__device__ __forceinline__ QRow lane_row(QRow R, int t) {
#if QK == Q8_0 || QK == Q4_K
    R.p0 += 8 * t;
#elif QK == Q4_0 || QK == Q4_1
    R.p0 += 8 * (t & 1);
#elif QK == Q6_K
    R.p0 += 8 * t; R.p1 += 8 * t;
#endif
    return R;
}
__device__ __forceinline__ void step_l(QRow& R) {
#if QK == Q8_0
    R.p0 += 256; R.p2 += 16;
#elif QK == Q4_0
    R.p0 += 128; R.p2 += 16;
#elif QK == Q4_1
    R.p0 += 128; R.p2 += 32;
#elif QK == Q4_K
    R.p0 += 128; R.p1 += 16;
#elif QK == Q6_K
    R.p0 += 128; R.p1 += 64; R.p2 += 2; R.p3 += 16;
#endif
}
__device__ __forceinline__ Raw load_l(const QRow& R) {
    Raw r;
#if QK == Q8_0
#pragma unroll
    for (int u = 0; u < 8; u++) r.q[u] = ld8(R.p0 + 32 * u);
    r.h = __ldg((const uint4*)R.p2);
#elif QK == Q4_0 || QK == Q4_1
#pragma unroll
    for (int u = 0; u < 8; u++) r.q[u] = ld8(R.p0 + 16 * u);
#if QK == Q4_0
    r.h = __ldg((const uint4*)R.p2);
#else
    r.h = __ldg((const uint4*)R.p2); r.h2 = __ldg((const uint4*)(R.p2 + 16));
#endif
#elif QK == Q4_K
    r.h = __ldg((const uint4*)R.p1);
#pragma unroll
    for (int j = 0; j < 4; j++) r.q[j] = ld8(R.p0 + 32 * j);
#elif QK == Q6_K
#pragma unroll
    for (int j = 0; j < 4; j++) r.l[j] = ld8(R.p0 + 32 * j);
#pragma unroll
    for (int h = 0; h < 2; h++) r.hb[h] = ld8(R.p1 + 32 * h);
    r.h = __ldg((const uint4*)R.p3);
    r.d = __ldg((const unsigned short*)R.p2);
#endif
    return r;
}
