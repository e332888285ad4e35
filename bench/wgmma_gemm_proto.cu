// Prototype (not wired into the server). Its first run (fourth stop, receipt
// 2026-11-29-gpu-pdl/tuning/wgmma_proto.txt): 0 differing bits on every shape, ~195 TFLOP/s;
// its successor is bench/wgmma_gemm_v2.cu, whose fastest variant is kernels/wgmma_cuda.py.
// A Hopper wgmma GEMM that runs matmul_cuda's arithmetic, checked bit for bit against that
// arithmetic's definition and timed (its TFLOP/s against the matmul rate gpu_bench measures
// with cuBLAS/torch on the same machine). bench/wgmma_probe.cu showed wgmma m64n8k16 ==
// mma.sync m16n8k16 bit for bit (receipt 2026-11-29-wgmma-probe); this kernel would use it.
//
// Arithmetic (kernels/matmul_cuda.py): C[m, n] = (((0 + S_0) + S_1) + ...) + S_7, S_q the
// sum of range q of the 32-k chunks, each chunk two k16 steps fed in a fixed permutation of k
// (lane t of a quad holds k 8t..8t+7; step h takes k {8t+4h .. 8t+4h+3}).
// Here: a block of 2 warpgroups owns 128 x 128 of C; x chunks through shared memory (rows of
// 64 bytes) into registers (wgmma's A from registers: the mma.sync fragment); W in a packed
// order whose 16-byte pieces are wgmma core-matrix rows (k-major, no swizzle), so cp.async
// lands them in place: piece p = 2h + kc of (n, chunk) holds k {8t + 2p, 8t + 2p + 1 : t}.
// Each warpgroup sums a range in `acc` (64 registers) and folds it into `tot` at its end.
//
//   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -o /tmp/wgp bench/wgmma_gemm_proto.cu
//   /tmp/wgp [M N K]
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "wgmma_reference.cuh"
#define ST 4                                   // pipeline stages of one 32-k chunk

// D[64] += A (registers) x B (shared memory, descriptor): wgmma m64n128k16, bf16 -> f32
__device__ __forceinline__ void wgmma128(float* d, unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1));
}

__device__ __forceinline__ void cp16(void* dst, const void* src) {
    const unsigned d = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(d), "l"(src));
}
__device__ __forceinline__ unsigned long long desc_of(const void* p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    return (unsigned long long)((a >> 4) & 0x3FFF) | ((unsigned long long)(128 >> 4) << 16)
         | ((unsigned long long)(256 >> 4) << 32);          // K step 128 B, N step 256 B
}

// grid (N / 128, M / 128), 256 threads (2 warpgroups), dynamic smem ST x 16 KB.
// Wp: [N][K / 32][4 pieces][8] bf16 (the packed order above). M, N multiples of 128, K of 32.
__global__ void __launch_bounds__(256, 1) wg_gemm(const bf16* x, const bf16* Wp, float* C,
                                                  int M, int N, int K) {
    extern __shared__ __align__(1024) unsigned char sm[];
    const int tid = threadIdx.x, wgi = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int m0 = blockIdx.y * 128, n0 = blockIdx.x * 128, nch = K / 32;
    auto As = [&](int s) { return sm + s * 16384; };            // 128 rows x 64 B
    auto Bs = [&](int s) { return sm + s * 16384 + 8192; };     // 2 steps x 4 KB
    auto load = [&](int c) {
        unsigned char* a = As(c % ST);
        unsigned char* b = Bs(c % ST);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int i = tid + 256 * r;
            const int row = i >> 2, pc = i & 3;
            cp16(a + row * 64 + pc * 16, x + (long long)(m0 + row) * K + 32 * c + 8 * pc);
            const int n = i >> 2, h = pc >> 1, kc = pc & 1;
            cp16(b + h * 4096 + (n >> 3) * 256 + kc * 128 + (n & 7) * 16,
                 Wp + (((long long)(n0 + n) * nch + c) * 4 + pc) * 8);
        }
    };
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s < nch) load(s);
        asm volatile("cp.async.commit_group;\n");
    }
    float acc[64], tot[64];
#pragma unroll
    for (int i = 0; i < 64; i++) { acc[i] = 0.f; tot[i] = 0.f; }
    int q = 0, q_end = range_lo(1, nch);
    const int r0 = 64 * wgi + 16 * w + g;
    for (int c = 0; c < nch; c++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(ST - 2));
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();
        if (c + ST - 1 < nch) load(c + ST - 1);
        asm volatile("cp.async.commit_group;\n");
        while (c >= q_end) {                                    // a range ends: fold, restart
#pragma unroll
            for (int i = 0; i < 64; i++) { tot[i] = __fadd_rn(tot[i], acc[i]); acc[i] = 0.f; }
            q++;
            q_end = range_lo(q + 1, nch);
        }
        const unsigned char* a = As(c % ST);
        const uint4 xl = *(const uint4*)(a + r0 * 64 + t * 16);
        const uint4 xh = *(const uint4*)(a + (r0 + 8) * 64 + t * 16);
        const unsigned char* b = Bs(c % ST);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        wgmma128(acc, xl.x, xh.x, xl.y, xh.y, desc_of(b));
        wgmma128(acc, xl.z, xh.z, xl.w, xh.w, desc_of(b + 4096));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    asm volatile("cp.async.wait_group 0;\n");
    while (q < KSPLIT) {
#pragma unroll
        for (int i = 0; i < 64; i++) { tot[i] = __fadd_rn(tot[i], acc[i]); acc[i] = 0.f; }
        q++;
    }
#pragma unroll
    for (int j = 0; j < 16; j++) {
        const int n = n0 + 8 * j + 2 * t;
        C[(long long)(m0 + r0) * N + n] = tot[4 * j];
        C[(long long)(m0 + r0) * N + n + 1] = tot[4 * j + 1];
        C[(long long)(m0 + r0 + 8) * N + n] = tot[4 * j + 2];
        C[(long long)(m0 + r0 + 8) * N + n + 1] = tot[4 * j + 3];
    }
}


int main(int argc, char** argv) {
    const int M = argc > 3 ? atoi(argv[1]) : 2048, N = argc > 3 ? atoi(argv[2]) : 4096,
              K = argc > 3 ? atoi(argv[3]) : 4096;
    if (M % 128 || N % 128 || K % 32) { printf("M, N multiples of 128, K of 32\n"); return 2; }
    std::mt19937 rng(7);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::vector<bf16> X((size_t)M * K), W((size_t)N * K), Wp((size_t)N * K);
    for (auto& v : X) v = to_bf16(nd(rng));
    for (auto& v : W) v = to_bf16(0.02f * nd(rng));
    const int nch = K / 32;
    for (int n = 0; n < N; n++)                          // the packed order (see the top)
        for (int c = 0; c < nch; c++)
            for (int p = 0; p < 4; p++)
                for (int t = 0; t < 4; t++)
                    for (int j = 0; j < 2; j++)
                        Wp[(((size_t)n * nch + c) * 4 + p) * 8 + 2 * t + j] =
                            W[(size_t)n * K + 32 * c + 8 * t + 2 * p + j];
    bf16 *dx = upload(X), *dw = upload(W), *dwp = upload(Wp);
    float *dref = device_buffer<float>((size_t)M * N), *dwg = device_buffer<float>((size_t)M * N);
    reference<<<dim3(N / 8, M / 16), 32>>>(dx, dw, dref, M, N, K);
    const int smem = ST * 16384;
    cudaFuncSetAttribute(wg_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    cudaMemset(dwg, 0xff, (size_t)M * N * 4);
    wg_gemm<<<dim3(N / 128, M / 128), 256, smem>>>(dx, dwp, dwg, M, N, K);
    cudaError_t e = cudaDeviceSynchronize();
    if (e != cudaSuccess) { printf("error: %s\n", cudaGetErrorString(e)); return 1; }
    std::vector<float> R((size_t)M * N), G((size_t)M * N);
    cudaMemcpy(R.data(), dref, R.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(G.data(), dwg, G.size() * 4, cudaMemcpyDeviceToHost);
    size_t diff = 0;
    for (size_t i = 0; i < R.size(); i++) diff += memcmp(&R[i], &G[i], 4) != 0;
    cudaEvent_t s0, s1;
    cudaEventCreate(&s0); cudaEventCreate(&s1);
    auto time = [&](auto fn) {
        fn(); cudaDeviceSynchronize();
        cudaEventRecord(s0);
        for (int i = 0; i < 10; i++) fn();
        cudaEventRecord(s1); cudaEventSynchronize(s1);
        float ms; cudaEventElapsedTime(&ms, s0, s1);
        return ms / 10;
    };
    const double flop = 2.0 * M * N * K;
    const float t_wg = time([&] { wg_gemm<<<dim3(N / 128, M / 128), 256, smem>>>(dx, dwp, dwg, M, N, K); });
    printf("M %d N %d K %d: wgmma kernel vs the definition: %zu of %zu outputs differ in any bit\n",
           M, N, K, diff, R.size());
    printf("wgmma kernel %.3f ms (%.0f TFLOP/s)\n", t_wg, flop / t_wg / 1e9);
    return diff != 0;
}
