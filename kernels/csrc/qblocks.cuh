// GGUF quantized blocks on the device: the unpack of one lane's 8 consecutive weights.
//
// A matrix [N, K] of one GGML type is kept as the file's bytes, regrouped per row into planes
// (structure of arrays: the same bytes, aligned so a lane's 8 weights are one 8-byte load;
// kernels/qmatmul_cuda.py `upload` makes them from a Blocks):
//   Q8_0: p0 int8 qs [N, K]        p2 half d [N, K/32]
//   Q4_0: p0 qs [N, K/2]           p2 half d [N, K/32]
//   Q4_1: p0 qs [N, K/2]           p2 half2 (d, m) [N, K/32]
//   Q4_K: p0 qs [N, K/2]           p1 scales [N, K/256, 12]     p2 half2 (d, dmin) [N, K/256]
//   Q6_K: p0 ql [N, K/2]           p1 qh [N, K/4]    p3 int8 scales [N, K/16]   p2 half d [N, K/256]
// `unpack8` gives weights k = 32c + 8t .. 32c + 8t + 7 of row n as bf16 pairs (natural order,
// word i = k pair 2i, 2i + 1): each weight is gguf's float32 dequantization (the same operations
// in the same order as gguf.quants' numpy code: Q8_0 q d; Q4_0 d (q - 8); Q4_1 (d q) + m;
// Q4_K (d sc) q - (dmin m); Q6_K (d sc) (q - 32), each product and sum rounded on its own)
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
__device__ __forceinline__ unsigned bpair(float lo, float hi) {
    unsigned r;
    asm("{ cvt.rn.bf16x2.f32 %0, %1, %2; }" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}
// an integer code 0 <= b < 2^23 as a float, exactly, without a conversion instruction
// (2^23 + b is exact in float32; `off` = 2^23 + o gives b - o, also exact for |o| < 2^8)
__device__ __forceinline__ float code(unsigned b, float off) {
    return __fsub_rn(__uint_as_float(0x4B000000u | b), off);
}
__device__ __forceinline__ uint2 ld8(const unsigned char* p) { return __ldg((const uint2*)p); }

// q: the 8 unsigned 4-bit (or 8-bit) codes, a, b: per-lane scale terms; the weight's formula
// by type (see above)
__device__ __forceinline__ uint4 unpack8(const QPlanes P, int n, int c, int t, int K) {
    float v[8];
    const long long row = (long long)n;
#if QK == Q8_0
    const uint2 q = ld8(P.p0 + row * K + 32 * c + 8 * t);
    const float d = h2f(((const unsigned short*)P.p2)[row * (K / 32) + c]);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        // the byte with its sign bit flipped is b + 128
        const unsigned b = __byte_perm((i < 4 ? q.x : q.y) ^ 0x80808080u, 0, 0x4440 + (i & 3));
        v[i] = __fmul_rn(code(b, 8388736.f), d);
    }
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
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned b = ((i < 4 ? q.x : q.y) >> (8 * (i & 3) + sh)) & 0xfu;
#if QK == Q4_0
        v[i] = __fmul_rn(d, code(b, 8388616.f));
#else
        v[i] = __fadd_rn(__fmul_rn(d, code(b, 8388608.f)), m);
#endif
    }
#elif QK == Q4_K
    // super-block sb = c / 8, sub-block s = c % 8: weight l of s is nibble (s & 1) of
    // qs[32 (s / 2) + l]; scale and min 6 bits each from the 12 scale bytes
    const int sb = c >> 3, s = c & 7;
    const uint2 q = ld8(P.p0 + row * (K / 2) + 128 * sb + 32 * (s >> 1) + 8 * t);
    const unsigned char* sc = P.p1 + (row * (K / 256) + sb) * 12;
    int scv, mv;
    if (s < 4) { scv = sc[s] & 63; mv = sc[s + 4] & 63; }
    else { scv = (sc[s + 4] & 0xf) | ((sc[s - 4] >> 6) << 4); mv = (sc[s + 4] >> 4) | ((sc[s] >> 6) << 4); }
    const unsigned dm = ((const unsigned*)P.p2)[row * (K / 256) + sb];
    const float D = __fmul_rn(h2f((unsigned short)(dm & 0xffffu)), (float)scv);
    const float M = __fmul_rn(h2f((unsigned short)(dm >> 16)), (float)mv);
    const int sh = 4 * (s & 1);
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned b = ((i < 4 ? q.x : q.y) >> (8 * (i & 3) + sh)) & 0xfu;
        v[i] = __fsub_rn(__fmul_rn(D, code(b, 8388608.f)), M);
    }
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
#pragma unroll
    for (int i = 0; i < 8; i++) {
        const unsigned wl = i < 4 ? ql.x : ql.y, wh = i < 4 ? qh.x : qh.y;
        const unsigned b = ((wl >> (8 * (i & 3) + shl)) & 0xfu) | (((wh >> (8 * (i & 3) + shh)) & 3u) << 4);
        v[i] = __fmul_rn(D, code(b, 8388640.f));
    }
#else
#error "QK: one of Q8_0, Q4_0, Q4_1, Q4_K, Q6_K"
#endif
    return make_uint4(bpair(v[0], v[1]), bpair(v[2], v[3]), bpair(v[4], v[5]), bpair(v[6], v[7]));
}
