// The definition of matmul_cuda's arithmetic shared by the wgmma GEMM experiments
// (bench/wgmma_gemm_proto.cu, bench/wgmma_gemm_v2.cu): mma.sync m16n8k16, K in chunks of 32,
// chunks in KSPLIT ranges folded in order; `reference` is the one-warp-a-tile kernel every
// output bit is checked against.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

typedef unsigned short bf16;
#define KSPLIT 8

__device__ __forceinline__ void mma(float* d, unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                    unsigned b0, unsigned b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}
// wgmma group control (sm_90a), shared by the wgmma experiments
template <int n> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(n) : "memory");
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ int range_lo(int q, int nch) { return (int)((long long)q * nch / KSPLIT); }

// The definition: one warp a 16 x 8 tile, every range from global memory, W row-major [N, K].
__global__ void reference(const bf16* x, const bf16* W, float* C, int M, int N, int K) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 16, nch = K / 32;
    float tot[4] = {0.f, 0.f, 0.f, 0.f};
    for (int q = 0; q < KSPLIT; q++) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int c = range_lo(q, nch); c < range_lo(q + 1, nch); c++) {
            const int k = 32 * c + 8 * t;
            const uint4 xl = *(const uint4*)(x + (long long)(m0 + g) * K + k);
            const uint4 xh = *(const uint4*)(x + (long long)(m0 + g + 8) * K + k);
            const uint4 w = *(const uint4*)(W + (long long)(n0 + g) * K + k);
            mma(acc, xl.x, xh.x, xl.y, xh.y, w.x, w.y);
            mma(acc, xl.z, xh.z, xl.w, xh.w, w.z, w.w);
        }
        for (int r = 0; r < 4; r++) tot[r] = __fadd_rn(tot[r], acc[r]);
    }
    C[(long long)(m0 + g) * N + n0 + 2 * t] = tot[0];
    C[(long long)(m0 + g) * N + n0 + 2 * t + 1] = tot[1];
    C[(long long)(m0 + g + 8) * N + n0 + 2 * t] = tot[2];
    C[(long long)(m0 + g + 8) * N + n0 + 2 * t + 1] = tot[3];
}

static bf16 to_bf16(float f) { uint32_t u; memcpy(&u, &f, 4); u += 0x7fff + ((u >> 16) & 1); return (bf16)(u >> 16); }

// fast normal samples for the hosts (xorshift64* + Box-Muller): the big shapes have 10^8 weights
struct Rng {
    uint64_t s;
    float spare; bool has = false;
    explicit Rng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ULL + 1) {}
    uint32_t next() { s ^= s >> 12; s ^= s << 25; s ^= s >> 27; return (uint32_t)((s * 0x2545F4914F6CDD1DULL) >> 32); }
    float normal() {
        if (has) { has = false; return spare; }
        const float u1 = (next() + 1.f) * 2.3283064e-10f, u2 = next() * 2.3283064e-10f;
        const float r = sqrtf(-2.f * logf(u1)), a = 6.2831853f * u2;
        spare = r * sinf(a); has = true;
        return r * cosf(a);
    }
};

// host: a device copy of v (the harnesses' inputs), and a device buffer of n elements
template <class T> static T* upload(const std::vector<T>& v) {
    T* d = nullptr;
    cudaMalloc(&d, v.size() * sizeof(T));
    cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice);
    return d;
}
template <class T> static T* device_buffer(size_t n) {
    T* d = nullptr;
    cudaMalloc(&d, n * sizeof(T));
    return d;
}
