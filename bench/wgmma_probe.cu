// Does Hopper's wgmma (m64n8k16, bf16 in, f32 accumulate) give the same bits as mma.sync
// m16n8k16 on the same operands and accumulators? Our GEMMs' arithmetic is defined by
// mma.sync's k16 sums (kernels/matmul_cuda.py); a wgmma kernel for the large-M GEMMs could
// keep every row's bytes only if the answer is yes. This probe runs both on the same random
// tiles (chains of 8 k16 steps from random accumulators, magnitudes spread over 2^-20..2^20)
// and counts differing bits; it also checks wgmma against a float64 reference, for each of
// a few shared-memory descriptor settings, so a wrong operand layout shows up as error, not
// as a difference.
//
//   nvcc -gencode arch=compute_90a,code=sm_90a -O2 -o /tmp/wgmma_probe bench/wgmma_probe.cu
//   /tmp/wgmma_probe
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <random>
#include <vector>

typedef unsigned short bf16;
static const int STEPS = 8;           // k16 steps accumulated in one chain
static const int TRIALS = 2048;       // blocks, each its own tile and chain

__device__ __forceinline__ unsigned pk(bf16 lo, bf16 hi) { return ((unsigned)hi << 16) | lo; }

// A [TRIALS][STEPS][64][16], Bt [TRIALS][STEPS][8][16] (B^T: n rows of 16 k), C [TRIALS][64][8]
__global__ void __launch_bounds__(128) probe(const bf16* A, const bf16* Bt, const float* C,
                                             float* Dw, float* Dm, int lbo, int sbo) {
    __shared__ __align__(128) bf16 bs[2][8][8];            // two core matrices: k 0-7, k 8-15
    const int tid = threadIdx.x, w = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
    const long long tr = blockIdx.x;
    const float* c = C + tr * 64 * 8;
    const int r0 = 16 * w + g, r1 = r0 + 8;
    float dw[4] = {c[r0 * 8 + 2 * t], c[r0 * 8 + 2 * t + 1], c[r1 * 8 + 2 * t], c[r1 * 8 + 2 * t + 1]};
    float dm[4] = {dw[0], dw[1], dw[2], dw[3]};
    for (int s = 0; s < STEPS; s++) {
        const bf16* a = A + ((tr * STEPS + s) * 64) * 16;
        const bf16* b = Bt + ((tr * STEPS + s) * 8) * 16;
        // A fragment (mma m16n8k16 row layout; wgmma's register A per warp is the same)
        const unsigned a0 = pk(a[r0 * 16 + 2 * t], a[r0 * 16 + 2 * t + 1]);
        const unsigned a1 = pk(a[r1 * 16 + 2 * t], a[r1 * 16 + 2 * t + 1]);
        const unsigned a2 = pk(a[r0 * 16 + 2 * t + 8], a[r0 * 16 + 2 * t + 9]);
        const unsigned a3 = pk(a[r1 * 16 + 2 * t + 8], a[r1 * 16 + 2 * t + 9]);
        // mma.sync: B fragment col layout (b0: k 2t, 2t+1 of column g; b1: k 2t+8, 2t+9)
        const unsigned b0 = pk(b[g * 16 + 2 * t], b[g * 16 + 2 * t + 1]);
        const unsigned b1 = pk(b[g * 16 + 2 * t + 8], b[g * 16 + 2 * t + 9]);
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                     : "+f"(dm[0]), "+f"(dm[1]), "+f"(dm[2]), "+f"(dm[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
        // wgmma: B^T in shared memory, K-major, no swizzle: core matrix h holds k 8h..8h+7
        // of the 8 columns, 16 bytes a column
        __syncthreads();
        if (tid < 128) {
            const int n = tid >> 4, k = tid & 15;
            bs[k >> 3][n][k & 7] = b[n * 16 + k];
        }
        __syncthreads();
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        const unsigned addr = (unsigned)__cvta_generic_to_shared(&bs[0][0][0]);
        const uint64_t desc = (uint64_t)((addr >> 4) & 0x3FFF) | ((uint64_t)((lbo >> 4) & 0x3FFF) << 16)
                            | ((uint64_t)((sbo >> 4) & 0x3FFF) << 32);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        const int scale_d = 1;                              // D = A B + D
        asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
                     "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 "
                     "{%0,%1,%2,%3}, {%4,%5,%6,%7}, %8, p, 1, 1, 0;\n}\n"
                     : "+f"(dw[0]), "+f"(dw[1]), "+f"(dw[2]), "+f"(dw[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(scale_d));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
    }
    float* ow = Dw + tr * 64 * 8;
    float* om = Dm + tr * 64 * 8;
    ow[r0 * 8 + 2 * t] = dw[0]; ow[r0 * 8 + 2 * t + 1] = dw[1];
    ow[r1 * 8 + 2 * t] = dw[2]; ow[r1 * 8 + 2 * t + 1] = dw[3];
    om[r0 * 8 + 2 * t] = dm[0]; om[r0 * 8 + 2 * t + 1] = dm[1];
    om[r1 * 8 + 2 * t] = dm[2]; om[r1 * 8 + 2 * t + 1] = dm[3];
}

static bf16 to_bf16(float f) { uint32_t u; memcpy(&u, &f, 4); return (bf16)(u >> 16); }
static float from_bf16(bf16 h) { uint32_t u = (uint32_t)h << 16; float f; memcpy(&f, &u, 4); return f; }

int main() {
    std::mt19937 rng(12345);
    std::normal_distribution<float> nd(0.f, 1.f);
    std::uniform_int_distribution<int> ex(-20, 20);
    const size_t na = (size_t)TRIALS * STEPS * 64 * 16, nb = (size_t)TRIALS * STEPS * 8 * 16,
                 nc = (size_t)TRIALS * 64 * 8;
    std::vector<bf16> A(na), B(nb);
    std::vector<float> C(nc);
    for (auto& v : A) v = to_bf16(std::ldexp(nd(rng), ex(rng) / 4));   // spread over ~2^-5..2^5
    for (auto& v : B) v = to_bf16(std::ldexp(nd(rng), ex(rng) / 4));
    for (auto& v : C) v = std::ldexp(nd(rng), ex(rng));                // accumulators 2^-20..2^20
    bf16 *dA, *dB; float *dC, *dW, *dM;
    cudaMalloc(&dA, na * 2); cudaMalloc(&dB, nb * 2); cudaMalloc(&dC, nc * 4);
    cudaMalloc(&dW, nc * 4); cudaMalloc(&dM, nc * 4);
    cudaMemcpy(dA, A.data(), na * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dB, B.data(), nb * 2, cudaMemcpyHostToDevice);
    cudaMemcpy(dC, C.data(), nc * 4, cudaMemcpyHostToDevice);
    // float64 reference of the chain (exact products, one rounding at the end)
    std::vector<double> ref(nc), mag(nc);
    for (int tr = 0; tr < TRIALS; tr++)
        for (int m = 0; m < 64; m++)
            for (int n = 0; n < 8; n++) {
                double s = C[((size_t)tr * 64 + m) * 8 + n], a = std::fabs(s);
                for (int st = 0; st < STEPS; st++)
                    for (int k = 0; k < 16; k++) {
                        const double p = (double)from_bf16(A[(((size_t)tr * STEPS + st) * 64 + m) * 16 + k]) *
                                         (double)from_bf16(B[(((size_t)tr * STEPS + st) * 8 + n) * 16 + k]);
                        s += p; a += std::fabs(p);
                    }
                ref[((size_t)tr * 64 + m) * 8 + n] = s;
                mag[((size_t)tr * 64 + m) * 8 + n] = a;
            }
    const int cand[][2] = {{128, 256}, {256, 128}, {128, 128}, {256, 256}};
    std::vector<float> W(nc), M(nc);
    for (auto& lb : cand) {
        cudaMemset(dW, 0, nc * 4);
        probe<<<TRIALS, 128>>>(dA, dB, dC, dW, dM, lb[0], lb[1]);
        cudaError_t e = cudaDeviceSynchronize();
        if (e != cudaSuccess) { printf("LBO %d SBO %d: %s\n", lb[0], lb[1], cudaGetErrorString(e)); return 1; }
        cudaMemcpy(W.data(), dW, nc * 4, cudaMemcpyDeviceToHost);
        cudaMemcpy(M.data(), dM, nc * 4, cudaMemcpyDeviceToHost);
        double werr = 0, merr = 0;
        size_t diff = 0;
        for (size_t i = 0; i < nc; i++) {
            werr = std::fmax(werr, std::fabs(W[i] - ref[i]) / mag[i]);
            merr = std::fmax(merr, std::fabs(M[i] - ref[i]) / mag[i]);
            uint32_t a, b; memcpy(&a, &W[i], 4); memcpy(&b, &M[i], 4);
            diff += a != b;
        }
        printf("LBO %d SBO %d: wgmma max err %.3g, mma.sync max err %.3g (of sum |terms|); "
               "bitwise differences wgmma vs mma.sync: %zu of %zu\n", lb[0], lb[1], werr, merr, diff, nc);
    }
    return 0;
}
