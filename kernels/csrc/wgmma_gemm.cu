
#define KSPLIT 8
#define BN_ %(BN)d
#define BM_ %(BM)d
#define ST_ %(ST)d
#define TOTR_ %(TOTR)d
#define GM_ %(GM)d
#define NACC (BN_ / 2)
#define B_LBO %(LBO)d
#define B_SBO %(SBO)d
#define B_HST %(HST)d
#define A_BYTES (BM_ * 64)
#define CT %(CT)d
#define SMEM_PIPE (ST_ * CT)

__device__ __forceinline__ int range_lo(int q, int nch) { return (int)((long long)q * nch / KSPLIT); }
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    unsigned d;
    asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %%1; cvt.u32.u64 %%0, a; }\n" : "=r"(d) : "l"(p));
    return d;
}
// D[128] += A (registers) x B (shared memory, descriptor): wgmma m64n256k16, bf16 -> f32
__device__ __forceinline__ void wgmma256(float* d, unsigned a0, unsigned a1, unsigned a2,
                                         unsigned a3, unsigned long long desc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %%133, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%(DREGS)s}, "
                 "{%%128, %%129, %%130, %%131}, %%132, p, 1, 1, 0;\n}\n"
                 : %(DOUTS)s
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(desc), "r"(1) : "memory");
}
// 16 bytes (zeros where !ok) / 4 bytes from global to shared memory, asynchronously
__device__ __forceinline__ void cp16(unsigned dst, const void* src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%%0], [%%1], 16, %%2;\n"
                 :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp4(unsigned dst, const void* src) {
    asm volatile("cp.async.ca.shared.global [%%0], [%%1], 4;\n" :: "r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int n> __device__ __forceinline__ void cp_wait() {
    asm volatile("cp.async.wait_group %%0;\n" :: "n"(n) : "memory");
}
%(WG)s
__device__ __forceinline__ unsigned long long desc_of(unsigned a) {
    return (unsigned long long)((a >> 4) & 0x3FFF) | ((unsigned long long)(B_LBO >> 4) << 16)
         | ((unsigned long long)(B_SBO >> 4) << 32);
}

// grid: ceil(M / 128) * (N / 256) blocks (1-D, grouped order), 256 threads, SMEM dynamic.
// x [M, K] bf16 (K %% 32 == 0), Wp: matmul_cuda's Packed data [N/8][K/32][4][8][8] (pi order), N %% 256 == 0.
// SPLIT_ (few rows): grid (blocks, KSPLIT); block (b, q) sums range q only and writes it,
// unfolded and without bias, to C + q M N (matmul_cuda's fold_parts then folds in order).
extern "C" __global__ void __launch_bounds__(256, 1) wgmma_gemm(
        const bf16* __restrict__ x, const bf16* __restrict__ Wp, const bf16* bias,
        float* __restrict__ C, int M, int N, int K) {
    extern __shared__ __align__(1024) unsigned char sm[];
    const int tid = threadIdx.x, wgi = tid >> 7, w = (tid >> 5) & 3, lane = tid & 31;
    const int g = lane >> 2, t = lane & 3;
    const int tiles_m = (M + BM_ - 1) / BM_, tiles_n = N / BN_, per_group = GM_ * tiles_n;
    const int id = blockIdx.x, grp = id / per_group, first_m = grp * GM_;
    const int gm = min(GM_, tiles_m - first_m), rr = id - grp * per_group;
    const int m0 = (first_m + rr %% gm) * BM_, n0 = (rr / gm) * BN_;
    const int nch = K / 32;
#if SPLIT_
    const int c_lo = range_lo(blockIdx.y, nch), c_hi = range_lo(blockIdx.y + 1, nch);
#else
    const int c_lo = 0, c_hi = nch;
#endif
    const unsigned sbase = smem_addr(sm);
    float* tots = (float*)(sm + SMEM_PIPE);              // [NACC - TOTR_][256]

    // x: rows tid/4 and tid/4 + 64 of the tile, 16 bytes each (zeros past M)
    const int xr0 = m0 + (tid >> 2), xr1 = xr0 + 64;
    const bool ok0 = xr0 < M, ok1 = xr1 < M;
    const bf16* xsrc0 = x + (long long)(ok0 ? xr0 : 0) * K + 8 * (tid & 3);
    const bf16* xsrc1 = x + (long long)(ok1 ? xr1 : 0) * K + 8 * (tid & 3);
    const unsigned xdst = (tid >> 2) * 64 + (tid & 3) * 16;
    // W: word `within` of a Packed tile (of column group n0/8 + tid/128 + 2r; consecutive threads
    // read consecutive words): piece within / 32, row gg, word within %% 4 of the piece = the
    // row's stored word 4 piece + within %% 4 = natural word ww (k 2ww, 2ww+1 of the chunk)
    const int within = tid & 127, gg = (within >> 2) & 7, ww = 4 * (within & 3) + (within >> 5);
    const bf16* bsrc = Wp + ((long long)(n0 / 8 + (tid >> 7)) * nch) * 256 + within * 2;
    const long long bstep = 2LL * nch * 256;
    const unsigned bdst = A_BYTES + ((ww >> 1) & 1) * B_HST + (tid >> 7) * B_SBO + (ww & 1) * B_LBO
                        + gg * 16 + (ww >> 2) * 4;
    auto load_chunk = [&](int c) {
        const unsigned d = sbase + (c %% ST_) * CT;
        cp16(d + xdst, xsrc0 + 32 * c, ok0);
        cp16(d + xdst + 64 * 64, xsrc1 + 32 * c, ok1);
        const bf16* b = bsrc + 256LL * c;
        long long step;                      // opaque: keeps the compiler from 16 live pointers
        asm volatile("mov.b64 %%0, %%1;\n" : "=l"(step) : "l"(bstep));
#pragma unroll
        for (int r = 0; r < BN_ / 16; r++) {
            cp4(d + bdst + r * (2 * B_SBO), b);
            b += step;
        }
    };
#pragma unroll
    for (int s = 0; s < ST_ - 2; s++) {
        if (c_lo + s < c_hi) load_chunk(c_lo + s);
        cp_commit();
    }
    float acc[NACC];
    float totr[TOTR_];
#pragma unroll
    for (int i = 0; i < NACC; i++) acc[i] = 0.f;
#pragma unroll
    for (int i = 0; i < TOTR_; i++) totr[i] = 0.f;
#pragma unroll
    for (int i = TOTR_; i < NACC; i++) tots[(i - TOTR_) * 256 + tid] = 0.f;
    fence_acc(acc);
    auto fold = [&]() {                         // a range ends: tot = tot + acc, acc = 0
#pragma unroll
        for (int i = 0; i < NACC; i++) {
            if (i < TOTR_) {
                totr[i < TOTR_ ? i : 0] = __fadd_rn(totr[i < TOTR_ ? i : 0], acc[i]);
            } else {
                float* p = tots + (i - TOTR_) * 256 + tid;
                *p = __fadd_rn(*p, acc[i]);
                if ((i - TOTR_) %% 8 == 7) asm volatile("" ::: "memory");
            }
            acc[i] = 0.f;
        }
    };
    int q = 0, q_end = SPLIT_ ? 0x7fffffff : range_lo(1, nch);
    const unsigned aoff = (64 * wgi + 16 * w + g) * 64 + t * 16;   // rows r0, r0 + 8
    for (int c = c_lo; c < c_hi; c++) {
        cp_wait<ST_ - 3>();                             // chunk c landed (this thread's part)
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        __syncthreads();                                // .. everyone's; its slot's old MMAs done
        if (c + ST_ - 2 < c_hi) load_chunk(c + ST_ - 2);  // the slot of chunk c - 2 (complete)
        cp_commit();
        if (c >= q_end) {                               // range(s) end before chunk c
            wg_wait<0>();
            fence_acc(acc);
            do {
                fold();
                q++;
                q_end = range_lo(q + 1, nch);
            } while (c >= q_end);
            fence_acc(acc);
        }
        const unsigned slot = (c %% ST_) * CT;
        const unsigned char* a = sm + slot + aoff;
        const uint4 xl = *(const uint4*)a;
        const uint4 xh = *(const uint4*)(a + 8 * 64);
        const unsigned b = sbase + slot + A_BYTES;
        wg_fence();
        wgmma256(acc, xl.x, xh.x, xl.y, xh.y, desc_of(b));            // k {8t .. 8t+3}
        wgmma256(acc, xl.z, xh.z, xl.w, xh.w, desc_of(b + B_HST));    // k {8t+4 .. 8t+7}
        wg_commit();
        wg_wait<1>();
    }
    wg_wait<0>();
    fence_acc(acc);
    cp_wait<0>();
    const int row = m0 + 64 * wgi + 16 * w + g;
#if SPLIT_
    float* P = C + (long long)blockIdx.y * M * N;       // this range's sum, as it is
#pragma unroll
    for (int j = 0; j < BN_ / 8; j++) {
        const int n = n0 + 8 * j + 2 * t;
        if (row < M) *(float2*)(P + (long long)row * N + n) = make_float2(acc[4 * j], acc[4 * j + 1]);
        if (row + 8 < M) *(float2*)(P + (long long)(row + 8) * N + n) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
    }
#else
    while (q < KSPLIT) {                                // the last range (and empty ones)
        fold();
        q++;
    }
#pragma unroll
    for (int j = 0; j < BN_ / 8; j++) {
        float v[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int i = 4 * j + e;
            v[e] = i < TOTR_ ? totr[i < TOTR_ ? i : 0] : tots[(i - TOTR_) * 256 + tid];
        }
        const int n = n0 + 8 * j + 2 * t;
        if (bias) {
            const float b0 = b2f(bias[n]), b1 = b2f(bias[n + 1]);
            v[0] = v[0] + b0; v[1] = v[1] + b1; v[2] = v[2] + b0; v[3] = v[3] + b1;
        }
        if (row < M) *(float2*)(C + (long long)row * N + n) = make_float2(v[0], v[1]);
        if (row + 8 < M) *(float2*)(C + (long long)(row + 8) * N + n) = make_float2(v[2], v[3]);
        if (j %% 2 == 1) asm volatile("" ::: "memory");
    }
#endif
}
