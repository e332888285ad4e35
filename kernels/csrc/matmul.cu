
// one chunk of 32 k: xl/xh = rows g and g+8 (k 8t .. 8t+7), w = column g (k 8t .. 8t+7)
__device__ __forceinline__ void chunk(float* d, const uint4& xl, const uint4& xh, const uint4& w) {
    mma(d, xl.x, xh.x, xl.y, xh.y, w.x, w.y);
    mma(d, xl.z, xh.z, xl.w, xh.w, w.z, w.w);
}
__device__ __forceinline__ unsigned pack(float lo, float hi) {
    return ((unsigned)f2b(hi) << 16) | (unsigned)f2b(lo);
}
// 8 consecutive k of one x row as bf16 pairs (zeros past M or K)
__device__ __forceinline__ uint4 xrow8(const XT* x, int m, int M, int k, int K) {
    if (m >= M || k >= K) return make_uint4(0, 0, 0, 0);
#if X_F32
    const float4 a = __ldg((const float4*)(x + (long long)m * K + k));
    const float4 b = __ldg((const float4*)(x + (long long)m * K + k + 4));
    return make_uint4(pack(a.x, a.y), pack(a.z, a.w), pack(b.x, b.y), pack(b.z, b.w));
#else
    return __ldg((const uint4*)(x + (long long)m * K + k));
#endif
}
#if NORM_
// NORM_: x row m is rmsnorm(xo + xr) (xr alone without xo) computed on load with the row's
// scale r from the prologue: rmsnorm_cuda's arithmetic (common_cuda rms_apply), then bf16
__device__ __forceinline__ uint4 xnorm8(const float* xo, const float* xr, const bf16* nwt,
                                        float r, int m, int M, int k, int K) {
    if (m >= M || k >= K) return make_uint4(0, 0, 0, 0);
    const long long o = (long long)m * K + k;
    float4 a = __ldg((const float4*)(xr + o)), b = __ldg((const float4*)(xr + o + 4));
    if (xo) {
        const float4 c = __ldg((const float4*)(xo + o)), d = __ldg((const float4*)(xo + o + 4));
        a = make_float4(__fadd_rn(c.x, a.x), __fadd_rn(c.y, a.y), __fadd_rn(c.z, a.z), __fadd_rn(c.w, a.w));
        b = make_float4(__fadd_rn(d.x, b.x), __fadd_rn(d.y, b.y), __fadd_rn(d.z, b.z), __fadd_rn(d.w, b.w));
    }
    const bf16* w = nwt + k;
    return make_uint4(pack(rms_apply(a.x, r, w[0]), rms_apply(a.y, r, w[1])),
                      pack(rms_apply(a.z, r, w[2]), rms_apply(a.w, r, w[3])),
                      pack(rms_apply(b.x, r, w[4]), rms_apply(b.y, r, w[5])),
                      pack(rms_apply(b.z, r, w[6]), rms_apply(b.w, r, w[7])));
}
#endif
__device__ __forceinline__ void store(float* C, const bf16* bias, int M, int N, int m, int n,
                                      float v0, float v1) {
    if (m >= M) return;
    if (n < N) C[(long long)m * N + n] = bias ? v0 + b2f(bias[n]) : v0;
    if (n + 1 < N) C[(long long)m * N + n + 1] = bias ? v1 + b2f(bias[n + 1]) : v1;
}

// K range q of S_: chunks [q nch / S_, (q + 1) nch / S_)
__device__ __forceinline__ int range_lo(int q, int nch) { return (int)((long long)q * nch / S_); }

// grid (ceil(N / (8 NT)), ceil(M / (16 MT))), 32 S_ threads, dynamic shared memory
// S_ MT NT 128 floats: warp q sums K range q of the block's NT groups of 8 columns for its
// MT tiles of 16 rows (the x fragments of a chunk are loaded once and used for all NT
// groups); the S_ partial sums are then folded in order 0, 1, .. from 0.f by all threads.
// GLU_: the gate|up GEMM with SwiGLU in the epilogue: N = 2F columns, gate then up; the
// block's first NT/2 groups are gate groups, the others the up groups F/8 further on, and
// it writes silu_mul(gate, up) as bf16 [M, F] (C is then a bf16 pointer).
__device__ __forceinline__ int group_of(int j, int n8) {
#if GLU_
    return j < NT / 2 ? blockIdx.x * (NT / 2) + j : n8 / 2 + blockIdx.x * (NT / 2) + j - NT / 2;
#else
    return blockIdx.x * NT + j;
#endif
}
__device__ __forceinline__ bool group_ok(int j, int n8) {
#if GLU_
    return blockIdx.x * (NT / 2) + (j % (NT / 2)) < n8 / 2;
#else
    return group_of(j, n8) < n8;
#endif
}

// NORM_ (MT == 1): x is the residual h [M, K] f32 and xo the sublayer output (or null): the
// block first finds each of its rows' RMSNorm scale in rmsnorm_cuda's order (its T threads
// emulated by the 8 warps), block x == 0 writes h + xo to hout, and x loads are normed.
extern "C" __global__ void __launch_bounds__(32 * S_) stream(
        const XT* x, const bf16* W, const bf16* bias, float* C, int M, int N, int K,
        const float* xo, const bf16* nwt, float* hout, float eps) {
    extern __shared__ float part[];                  // [S_][MT][NT][4][32]
    const int lane = threadIdx.x & 31, q = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int n8 = (N + 7) / 8, m0 = blockIdx.y * 16 * MT;
    const int KC = (K + 31) / 32;
    const bf16* wr = W + g * 8 + t * 2;              // Packed: word t of row g in each piece
    const int nch = KC, c_lo = range_lo(q, nch), c_hi = range_lo(q + 1, nch);
    uint4 w[U_][NT];                                 // every load of U_ chunks in flight at once
    auto load_w = [&](int c0) {
#pragma unroll
        for (int u = 0; u < U_; u++)
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const bool ok = c0 + u < c_hi && group_ok(j, n8);
                const bf16* p = wr + (ok ? ((long long)group_of(j, n8) * KC + c0 + u) * 256 : 0);
                // four 32-bit loads, one a piece: each is one whole 128-byte line for the warp,
                // and lane (g, t) gets natural words 4t .. 4t+3 of row g (what `chunk` wants)
                const unsigned* pw = (const unsigned*)p;
                w[u][j] = ok ? make_uint4(__ldg(pw), __ldg(pw + 32), __ldg(pw + 64), __ldg(pw + 96))
                             : make_uint4(0, 0, 0, 0);
            }
    };
    pdl_trigger();
    load_w(c_lo);                   // the first weights in flight while the kernel before ends
    pdl_wait();                                      // nothing of x, C or hout before this
#if NORM_
#if MT != 1
#error "NORM_ needs MT == 1"
#endif
    __shared__ float red[16][33], rsc[16];
    {
        const int T = min(1024, (K + 31) / 32 * 32), nw = T / 32;
        for (int row = 0; row < 16 && m0 + row < M; row++) {
            const long long base = (long long)(m0 + row) * K;
            for (int vw = q; vw < nw; vw += S_) {        // virtual warp vw of the norm kernel
                const int tt = vw * 32 + lane;
                float ss = 0.f;
                for (int i = tt; i < K; i += T) {
                    const float v = xo ? __fadd_rn(xo[base + i], x[base + i]) : x[base + i];
                    ss = __fmaf_rn(v, v, ss);
                    if (hout && blockIdx.x == 0) hout[base + i] = v;
                }
                ss = warp_sum(ss);
                if (lane == 0) red[row][vw] = ss;
            }
        }
        __syncthreads();
        for (int row = q; row < 16; row += S_) {
            if (m0 + row >= M) break;
            float tot = lane < nw ? red[row][lane] : 0.f;
            tot = warp_sum(tot);
            if (lane == 0) rsc[row] = rms_scale(tot, K, eps);
        }
        __syncthreads();
    }
    const float r_lo = m0 + g < M ? rsc[g] : 0.f, r_hi = m0 + g + 8 < M ? rsc[g + 8] : 0.f;
#endif
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.f;
    for (int c0 = c_lo; c0 < c_hi; c0 += U_) {
        uint4 xl[U_][MT], xh[U_][MT];
#if PF_
        uint4 wc[U_][NT];                             // this round's weights; the next round's
#pragma unroll                                        // loads go out before its arithmetic
        for (int u = 0; u < U_; u++)
#pragma unroll
            for (int j = 0; j < NT; j++) wc[u][j] = w[u][j];
        if (c0 + U_ < c_hi) load_w(c0 + U_);
#else
        if (c0 != c_lo) load_w(c0);
        uint4 (&wc)[U_][NT] = w;
#endif
#pragma unroll
        for (int u = 0; u < U_; u++) {
            const int k = c0 + u < c_hi ? (c0 + u) * 32 + 8 * t : K;
#pragma unroll
            for (int i = 0; i < MT; i++) {
#if NORM_
                xl[u][i] = xnorm8(xo, x, nwt, r_lo, m0 + g, M, k, K);
                xh[u][i] = xnorm8(xo, x, nwt, r_hi, m0 + g + 8, M, k, K);
#else
                xl[u][i] = xrow8(x, m0 + 16 * i + g, M, k, K);
                xh[u][i] = xrow8(x, m0 + 16 * i + g + 8, M, k, K);
#endif
            }
        }
#pragma unroll
        for (int u = 0; u < U_; u++)
            if (c0 + u < c_hi) {
#pragma unroll
                for (int i = 0; i < MT; i++)
#pragma unroll
                    for (int j = 0; j < NT; j++) chunk(acc[i][j], xl[u][i], xh[u][i], wc[u][j]);
            }
    }
    constexpr int E = MT * NT * 128;                  // outputs of the block
#pragma unroll
    for (int i = 0; i < MT; i++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) part[q * E + ((i * NT + j) * 4 + r) * 32 + lane] = acc[i][j][r];
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += 32 * S_) {
        const int l = e & 31, r = (e >> 5) & 3, ij = e >> 7, i = ij / NT, j = ij % NT;
#if GLU_
        if (j >= NT / 2) continue;                    // up values are read with their gate
#endif
        float v = 0.f;
#pragma unroll
        for (int p = 0; p < S_; p++) v = __fadd_rn(v, part[p * E + e]);
        const int m = m0 + 16 * i + (l >> 2) + 8 * (r >> 1), n = 8 * group_of(j, n8) + 2 * (l & 3) + (r & 1);
#if GLU_
        const int F = N / 2;
        float vu = 0.f;
#pragma unroll
        for (int p = 0; p < S_; p++) vu = __fadd_rn(vu, part[p * E + e + (NT / 2) * 128]);
        if (m < M && n < F) {
            const float gv = bias ? v + b2f(bias[n]) : v, uv = bias ? vu + b2f(bias[F + n]) : vu;
            ((bf16*)C)[(long long)m * F + n] = f2b(silu_mul(gv, uv));
        }
#else
        if (m < M && n < N) C[(long long)m * N + n] = bias ? v + b2f(bias[n]) : v;
#endif
    }
}

#define BM 128
#define BN 128
#define ST 3
__device__ __forceinline__ void cp16(void* dst, const void* src, bool ok) {
    unsigned d;
    asm volatile("{ .reg .u64 a; cvta.to.shared.u64 a, %1; cvt.u32.u64 %0, a; }\n"
                 : "=r"(d) : "l"(dst));
    const int n = ok ? 16 : 0;                       // 0: fill the 16 bytes with zeros
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(d), "l"(src), "r"(n));
}
// a stage holds 64 k (two chunks) of BM x rows and BN W rows, 128 bytes a row in 8 pieces
// of 16; piece p of row r sits at p ^ 4 (r & 1), so the 8 lanes of a 16-byte access phase
// (rows g, g + 1, pieces t or 4 + t) hit 8 different bank groups.
__device__ __forceinline__ int sw(int r, int p) { return r * 64 + ((p ^ ((r & 1) << 2)) << 3); }

// grid (ceil(N / 128), ceil(M / 128), Z), 256 threads, dynamic shared memory ST stages; x bf16.
// Warp (wm, wn) owns rows 64 wm .. +63 and columns 32 wn .. +31 of the block's tile.
// Z == 1: the block sums every K range and folds them (tot); Z == S_: block z sums range z
// only and writes it to part[z] (`fold` kernel below adds them up in order).
extern "C" __global__ void __launch_bounds__(256, SPLIT_ONLY + 1) tiled(
        const bf16* x, const bf16* W, const bf16* bias, float* C, float* part,
        int M, int N, int K) {
    extern __shared__ __align__(16) unsigned char smem[];
    bf16* xs = (bf16*)smem;
    bf16* ws = xs + ST * BM * 64;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    const int wm = warp >> 2, wn = warp & 3;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    const int nch = (K + 31) / 32;
    const bool split = gridDim.z > 1;
    const int c_lo = split ? range_lo(blockIdx.z, nch) : 0;
    const int c_hi = split ? range_lo(blockIdx.z + 1, nch) : nch;
    const int s_lo = c_lo / 2, s_hi = (c_hi + 1) / 2;
    auto load = [&](int st) {
        bf16* xd = xs + (st % ST) * BM * 64;
        bf16* wd = ws + (st % ST) * BN * 64;
        for (int i = tid; i < BM * 8; i += 256) {
            const int r = i >> 3, p = i & 7, k = st * 64 + 8 * p;
            const int mx = min(m0 + r, M - 1), kk = min(k, K - 8);
            cp16(xd + sw(r, p), x + (long long)mx * K + kk, m0 + r < M && k < K);
            // W: consecutive i read consecutive 16 bytes of the Packed tiles: row rr (fastest),
            // piece pc, chunk h of the stage, column group G
            const int rr = i & 7, pc = (i >> 3) & 3, h = (i >> 5) & 1, rw = (i >> 6) * 8 + rr;
            const int n = n0 + rw, kw = st * 64 + 32 * h;
            const bool wok = n < N && kw < K;             // a chunk's stored pieces mix its k (pi order)
            cp16(wd + sw(rw, 4 * h + pc), W + (wok ? ((long long)(n >> 3) * nch + (kw >> 5)) * 256
                                                   + pc * 64 + rr * 8 : 0), wok);
        }
    };
#pragma unroll
    for (int s = 0; s < ST - 1; s++) {
        if (s_lo + s < s_hi) load(s_lo + s);
        asm volatile("cp.async.commit_group;\n");
    }
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) acc[i][j][r] = 0.f;
#if !SPLIT_ONLY
    float tot[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++)
#pragma unroll
            for (int r = 0; r < 4; r++) tot[i][j][r] = 0.f;
    int q = 0, q_end = split ? 0x7fffffff : range_lo(1, nch);
    auto fold = [&]() {                       // tot += this range's sum; the next starts at 0
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++)
#pragma unroll
                for (int r = 0; r < 4; r++) {
                    tot[i][j][r] = __fadd_rn(tot[i][j][r], acc[i][j][r]);
                    acc[i][j][r] = 0.f;
                }
        q++;
        q_end = range_lo(q + 1, nch);
    };
#endif
    for (int st = s_lo; st < s_hi; st++) {
        asm volatile("cp.async.wait_group %0;\n" :: "n"(ST - 2));
        __syncthreads();
        if (st + ST - 1 < s_hi) load(st + ST - 1);
        asm volatile("cp.async.commit_group;\n");
        const bf16* xb = xs + (st % ST) * BM * 64;
        const bf16* wb = ws + (st % ST) * BN * 64;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int c = 2 * st + h;
            if (c < c_lo || c >= c_hi) continue;
#if !SPLIT_ONLY
            while (c >= q_end) fold();
#endif
            uint4 wf[4];
#pragma unroll
            for (int j = 0; j < 4; j++) wf[j] = unpi(*(const uint4*)(wb + sw(32 * wn + 8 * j + g, 4 * h + t)));
#pragma unroll
            for (int i = 0; i < 4; i++) {
                const int r = 64 * wm + 16 * i + g;
                const uint4 xl = *(const uint4*)(xb + sw(r, 4 * h + t));
                const uint4 xh = *(const uint4*)(xb + sw(r + 8, 4 * h + t));
#pragma unroll
                for (int j = 0; j < 4; j++) chunk(acc[i][j], xl, xh, wf[j]);
            }
        }
    }
    asm volatile("cp.async.wait_group 0;\n");
    if (split) {
        float* pz = part + (long long)blockIdx.z * M * N;
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int m = m0 + 64 * wm + 16 * i + g, n = n0 + 32 * wn + 8 * j + 2 * t;
                store(pz, nullptr, M, N, m, n, acc[i][j][0], acc[i][j][1]);
                store(pz, nullptr, M, N, m + 8, n, acc[i][j][2], acc[i][j][3]);
            }
        return;
    }
#if !SPLIT_ONLY
    while (q < S_) fold();
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            const int m = m0 + 64 * wm + 16 * i + g, n = n0 + 32 * wn + 8 * j + 2 * t;
            store(C, bias, M, N, m, n, tot[i][j][0], tot[i][j][1]);
            store(C, bias, M, N, m + 8, n, tot[i][j][2], tot[i][j][3]);
        }
#endif
}

// C = (((0 + part[0]) + part[1]) + ...) + bias: the tiled kernel's fold, element by element
extern "C" __global__ void fold_parts(const float* part, const bf16* bias, float* C, int M, int N) {
    const long long n = (long long)M * N;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
         e += (long long)gridDim.x * blockDim.x) {
        float v = 0.f;
#pragma unroll
        for (int z = 0; z < S_; z++) v = __fadd_rn(v, part[z * n + e]);
        C[e] = bias ? v + b2f(bias[e % N]) : v;
    }
}
