
struct __align__(64) TMap { unsigned long long v[16]; };
#define KSPLIT 8
#define NCW 2
#define NTHR (128 * (NCW + 1))
#define NACC (BN / 2)
#define A_BYTES (BM * BK * 2)
#define B_BYTES (BN * BK * 2)
#define STAGE (A_BYTES + B_BYTES)
#define SMEM_PIPE (ST * STAGE)
#define NTOTS (NACC - TOTR)
#define SMEM_TOT (NTOTS * NCW * 128 * 4)

__device__ __forceinline__ void wgmma_ss(float* d, unsigned long long da, unsigned long long db, int sd) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %SD, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n" BNS "k16.f32.bf16.bf16 {DREGS}, %DA, %DB, p, 1, 1, 0, 0;\n}\n"
                 : DOUTS
                 : "l"(da), "l"(db), "r"(sd) : "memory");
}
WG_HELPERS
// x: K-major, 128-byte swizzle: start >> 4, LBO 1 (unused when swizzled), SBO 1024 bytes
// between 8-row groups, layout type 1;
// a k16 step inside a swizzled row adds its byte offset to the start (as CUTLASS does)
__device__ __forceinline__ unsigned long long desc(unsigned addr) {
    return (unsigned long long)((addr >> 4) & 0x3FFF) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32)
         | (1ull << 62);
}
// W: K-major, unswizzled: core matrices of 8 rows x 16 bytes; LBO 128 bytes (the next 8 k of a
// step: the next piece), SBO 1,024 (the next 8 rows: the next column group), layout type 0
__device__ __forceinline__ unsigned long long wdesc(unsigned addr) {
    return (unsigned long long)((addr >> 4) & 0x3FFF) | ((unsigned long long)(128 >> 4) << 16)
         | ((unsigned long long)(1024 >> 4) << 32);
}
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(unsigned bar, unsigned bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(unsigned bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(bar) : "memory");
}
// wait until the phase of parity `par` has completed (a fresh barrier: parity 1 passes)
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned par) {
    unsigned done;
    do {
        asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}\n" : "=r"(done) : "r"(bar), "r"(par) : "memory");
    } while (!done);
}
__device__ __forceinline__ void tma2(unsigned dst, const TMap* map, int c0, int c1, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3}], [%4];\n"
                 :: "r"(dst), "l"((unsigned long long)map), "r"(c0), "r"(c1), "r"(bar) : "memory");
}
// W stage kb of column groups from g8: box {256 (one whole Packed tile), 2 chunks, groups},
// unswizzled: a group's two tiles, 512 bytes each, then the next group (1,024 bytes on)
__device__ __forceinline__ void tma_w(unsigned dst, const TMap* map, int kb, int g8, unsigned bar) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {%2, %3, %4}], [%5];\n"
                 :: "r"(dst), "l"((unsigned long long)map), "r"(0), "r"(2 * kb), "r"(g8), "r"(bar) : "memory");
}
// output columns a tile: GLU tiles hold BN / 2 gate columns and the BN / 2 up columns F on
#define NB (GLU ? BN / 2 : BN)
#if SPLIT && GLU
#error "SPLIT and GLU do not go together"
#endif
// tile -> (m0, n0): groups of GM row tiles x all column tiles, row tile fastest
__device__ __forceinline__ void tile_origin(int tile, int tiles_m, int tiles_n, int& m0, int& n0) {
    const int per_group = GM * tiles_n, grp = tile / per_group, first_m = grp * GM;
    const int gm = min(GM, tiles_m - first_m), rr = tile - grp * per_group;
    m0 = (first_m + rr % gm) * BM;
    n0 = (rr / gm) * NB;
}

// grid min(tiles, SMs), NTHR threads, SMEM dynamic bytes. tmX: the permuted x [M, K] bf16, box
// {64, 128}, 128-byte swizzle; tmW: Packed W as [N/8][K/32][256], box {256, 2, BN/8}, no
// swizzle. C [M, N] f32 (+ bias bf16 [N] or null). N % BN == 0, K % 256 == 0.
// GLU: W is gate|up [N = 2F, K] and C is bf16 [M, F] = silu_mul(gate + bias, up + bias) (the
// W box is then {256, 2, BN/16}, loaded twice a stage: gate groups, then up groups F/8 on).
extern "C" __global__ void __launch_bounds__(NTHR, 1) gemm_tma(
        const __grid_constant__ TMap tmX, const __grid_constant__ TMap tmW, const bf16* bias,
        float* __restrict__ C, int M, int N, int K) {
    extern __shared__ unsigned char smraw[];
    const unsigned raw = (unsigned)__cvta_generic_to_shared(smraw);
    const unsigned base = (raw + 1023u) & ~1023u;                  // stages: 1024-aligned
    unsigned char* sm = smraw + (base - raw);
    const unsigned full_bar = base + SMEM_PIPE + SMEM_TOT, empty_bar = full_bar + 8 * ST;
    const int tid = threadIdx.x, wg = tid >> 7;
    if (tid == 0) {
        for (int s = 0; s < ST; s++) {
            mbar_init(full_bar + 8 * s, 1);                        // the producer's expect_tx
            mbar_init(empty_bar + 8 * s, NCW * 4);                 // every consumer warp
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    }
    __syncthreads();
    const int F = N / 2;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (GLU ? F : N) / NB, ntiles = tiles_m * tiles_n;
    const int nkb = K / BK, rch = K / 256;                         // stages a tile; chunks a range
#if SPLIT
    const int kb_lo = blockIdx.y * (nkb / KSPLIT), kb_hi = kb_lo + nkb / KSPLIT;   // range y alone
#else
    const int kb_lo = 0, kb_hi = nkb;
#endif

    if (wg == 0) {                                                 // producer
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(REG_P));
        if (tid == 0) {
            asm volatile("prefetch.tensormap [%0];\n" :: "l"((unsigned long long)&tmX) : "memory");
            asm volatile("prefetch.tensormap [%0];\n" :: "l"((unsigned long long)&tmW) : "memory");
            int slot = 0;
            unsigned ph = 0;
            for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
                int m0, n0;
                tile_origin(tile, tiles_m, tiles_n, m0, n0);
                for (int kb = kb_lo; kb < kb_hi; kb++) {
                    mbar_wait(empty_bar + 8 * slot, ph ^ 1);       // consumers released it
                    const unsigned fb = full_bar + 8 * slot, sA = base + slot * STAGE;
                    mbar_expect_tx(fb, STAGE);                     // whole boxes, OOB rows too
                    tma2(sA, &tmX, kb * BK, m0, fb);
#if GLU
                    tma_w(sA + A_BYTES, &tmW, kb, n0 / 8, fb);
                    tma_w(sA + A_BYTES + B_BYTES / 2, &tmW, kb, (F + n0) / 8, fb);
#else
                    tma_w(sA + A_BYTES, &tmW, kb, n0 / 8, fb);
#endif
                    if (++slot == ST) { slot = 0; ph ^= 1; }
                }
            }
        }
    } else {                                                       // consumers
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(REG_C));
        const int ci = wg - 1, ctid = tid - 128, w = (tid >> 5) & 3, lane = tid & 31;
        const int g = lane >> 2, t = lane & 3;
        float acc[NACC];
        float totr[TOTR];
        float* tots = (float*)(sm + SMEM_PIPE);                    // [NTOTS][NCW * 128]
        int slot = 0, prev = 0;
        unsigned ph = 0;
        for (int tile = blockIdx.x; tile < ntiles; tile += gridDim.x) {
            int m0, n0;
            tile_origin(tile, tiles_m, tiles_n, m0, n0);
            const int row0 = m0 + 64 * ci + 16 * w + g;            // and row0 + 8
            const bool ok0 = row0 < M, ok1 = row0 + 8 < M;
            // rows all past M (decode rows, BN 128 only: BN 256 spills with the branch): no
            // wgmma, barriers only
            const bool idle = BN == 128 && m0 + 64 * ci >= M;
#pragma unroll
            for (int i = 0; i < NACC; i++) acc[i] = 0.f;
#pragma unroll
            for (int i = 0; i < TOTR; i++) totr[i] = 0.f;
#pragma unroll
            for (int i = 0; i < NTOTS; i++) tots[i * (NCW * 128) + ctid] = 0.f;
            fence_acc(acc);
            // a range ends: tot = tot + acc for each element (ZFIRST: acc is left as it is, the
            // next range's first wgmma overwrites it with scale-d 0)
            auto fold = [&]() {
#pragma unroll
                for (int i = 0; i < TOTR; i++) {
                    totr[i] = __fadd_rn(totr[i], acc[i]);
                    if (!ZFIRST) acc[i] = 0.f;
                }
#pragma unroll
                for (int i = TOTR; i < NACC; i++) {
                    float* p = tots + (i - TOTR) * (NCW * 128) + ctid;
                    *p = __fadd_rn(*p, acc[i]);
                    if (!ZFIRST) acc[i] = 0.f;
                    if ((i - TOTR) % 8 == 7) asm volatile("" ::: "memory");   // few loads ahead
                }
            };
            int q_end = SPLIT ? 0x7fffffff : rch;                 // chunk where the next range starts
            int sd = ZFIRST ? 0 : 1;                               // scale-d of the next step 0
#pragma unroll 1
            for (int kb = kb_lo; kb < kb_hi; kb++) {
                mbar_wait(full_bar + 8 * slot, ph);                // the stage landed
                const unsigned sA = base + slot * STAGE, sB = sA + A_BYTES;
                const unsigned long long da = desc(sA + ci * (64 * 128)), db = wdesc(sB);
                if (!idle) {
#pragma unroll
                    for (int u = 0; u < 2; u++) {                  // chunk c = 2 kb + u
                        if (2 * kb + u == q_end) {                 // a range ends before it
                            wg_wait<0>();
                            fence_acc(acc);
                            fold();
                            q_end += rch;
                            if (ZFIRST) sd = 0;
                            fence_acc(acc);
                        }
                        wg_fence();
                        // chunk u, step h: x at +64u + 32h bytes, W at +512u + 256h (pieces 2h, 2h+1)
                        wgmma_ss(acc, da + 4 * u, db + 32 * u, sd);
                        wgmma_ss(acc, da + 4 * u + 2, db + 32 * u + 16, 1);
                        wg_commit();
                        sd = 1;
                    }
                    wg_wait<2>();                                  // the previous stage's done
                }
                if (kb > kb_lo && lane == 0) mbar_arrive(empty_bar + 8 * prev);
                prev = slot;
                if (++slot == ST) { slot = 0; ph ^= 1; }
            }
            if (!idle) {
                wg_wait<0>();
                fence_acc(acc);
            }
            if (lane == 0) mbar_arrive(empty_bar + 8 * prev);
            if (idle) continue;
#if SPLIT
            {                                                      // range y's sum, as it is
                float* P = C + (long long)blockIdx.y * M * N + (long long)row0 * N + n0 + 2 * t;
#pragma unroll
                for (int j = 0; j < BN / 8; j++) {
                    if (ok0) *(float2*)(P + 8 * j) = make_float2(acc[4 * j], acc[4 * j + 1]);
                    if (ok1) *(float2*)(P + 8LL * N + 8 * j) = make_float2(acc[4 * j + 2], acc[4 * j + 3]);
                    if (j % 2 == 1) asm volatile("" ::: "memory");
                }
                continue;
            }
#endif
            fold();                                                // the last range
            // total i = 4j + e: row row0 + 8 (e >> 1), tile column 8j + 2t + (e & 1)
            auto total = [&](int i) {
                return i < TOTR ? totr[i < TOTR ? i : 0] : tots[(i - TOTR) * (NCW * 128) + ctid];
            };
#if GLU
            unsigned* o0 = (unsigned*)((bf16*)C + (long long)row0 * F + n0 + 2 * t);
            unsigned* o1 = (unsigned*)((bf16*)C + (long long)(row0 + 8) * F + n0 + 2 * t);
#pragma unroll
            for (int j = 0; j < BN / 16; j++) {
                const int n = n0 + 8 * j + 2 * t;
                float v[4], vu[4];
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    v[e] = total(4 * j + e);
                    vu[e] = total(4 * (j + BN / 16) + e);
                    if (bias) {
                        v[e] = v[e] + b2f(bias[n + (e & 1)]);
                        vu[e] = vu[e] + b2f(bias[F + n + (e & 1)]);
                    }
                }
                const unsigned w0 = (unsigned)f2b(silu_mul(v[0], vu[0])) | ((unsigned)f2b(silu_mul(v[1], vu[1])) << 16);
                const unsigned w1 = (unsigned)f2b(silu_mul(v[2], vu[2])) | ((unsigned)f2b(silu_mul(v[3], vu[3])) << 16);
#if PIOUT
                // pi order for the next TMA GEMM: natural word wn of a 32-column chunk is
                // stored as word 4 (wn % 4) + wn / 4
                const int wn = (n & 31) >> 1, at = (n & ~31) / 2 - n0 / 2 - t + 4 * (wn & 3) + (wn >> 2);
                if (ok0) o0[at] = w0;
                if (ok1) o1[at] = w1;
#else
                if (ok0) o0[4 * j] = w0;
                if (ok1) o1[4 * j] = w1;
#endif
                if (j % 2 == 1) asm volatile("" ::: "memory");
            }
#else
            float* c0 = C + (long long)row0 * N + n0 + 2 * t;
            float* c1 = c0 + 8LL * N;
#pragma unroll
            for (int j = 0; j < BN / 8; j++) {
                float v[4];
#pragma unroll
                for (int e = 0; e < 4; e++) v[e] = total(4 * j + e);
                if (bias) {
                    const int n = n0 + 8 * j + 2 * t;
                    const float b0 = b2f(bias[n]), b1 = b2f(bias[n + 1]);
                    v[0] = v[0] + b0; v[1] = v[1] + b1; v[2] = v[2] + b0; v[3] = v[3] + b1;
                }
                if (ok0) *(float2*)(c0 + 8 * j) = make_float2(v[0], v[1]);
                if (ok1) *(float2*)(c1 + 8 * j) = make_float2(v[2], v[3]);
                if (j % 2 == 1) asm volatile("" ::: "memory");
            }
#endif
        }
    }
}
