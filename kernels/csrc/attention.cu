
__device__ __forceinline__ unsigned smem_u32(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void ldsm4(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldsm4t(unsigned (&r)[4], unsigned addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void cp16z(unsigned dst, const void* src, bool ok) {  // zero fill
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n"
                 :: "r"(dst), "l"(src), "r"(ok ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// element offset of (row, 16-byte chunk c) in a [rows][HD] bf16 tile: chunk c ^ (row & 7)
__device__ __forceinline__ int sw(int row, int c) { return row * HD + ((c ^ (row & 7)) << 3); }

// Step (1) pieces: q's A fragments (high qa, rest qb) for d chunks 2dp, 2dp + 1 of a warp's
// 16 m-rows, and one key tile's chain steps over those chunks (high, then rest, each chunk)
__device__ __forceinline__ void q_frags(unsigned (&qa)[2][4], unsigned (&qb)[2][4],
                                        const bf16* qw, const bf16* qwl, int dp, int lane) {
#pragma unroll
    for (int e = 0; e < 2; e++) {                             // a0..a3: rows 0-7/8-15 x d lo/hi
        const int at = sw((lane & 7) + 8 * ((lane >> 3) & 1), 2 * (2 * dp + e) + (lane >> 4));
        ldsm4(qa[e], smem_u32(qw + at));
        ldsm4(qb[e], smem_u32(qwl + at));
    }
}
__device__ __forceinline__ void score_steps(float (&c)[4], const unsigned (&qa)[2][4],
                                            const unsigned (&qb)[2][4], const bf16* kb, int nt,
                                            int dp, int lane) {
    unsigned kf[4];                                           // keys 8nt.., d chunks 4dp..4dp+3
    ldsm4(kf, smem_u32(kb + sw(8 * nt + (lane & 7), 4 * dp + (lane >> 3))));
    mma(c, qa[0][0], qa[0][1], qa[0][2], qa[0][3], kf[0], kf[1]);
    mma(c, qb[0][0], qb[0][1], qb[0][2], qb[0][3], kf[0], kf[1]);
    mma(c, qa[1][0], qa[1][1], qa[1][2], qa[1][3], kf[2], kf[3]);
    mma(c, qb[1][0], qb[1][1], qb[1][2], qb[1][3], kf[2], kf[3]);
}

// Step (7) at a span's end for a thread's two rows: fold the span's state (N d tiles from
// d tile dt0) into the running state, or, in split mode for rows of two spans or more, hand it
// to the scratch (m and l written by the thread `writer`).
template <int N>
__device__ __forceinline__ void span_end(const float (&acc)[N][4], int dt0, bool writer, int k0,
        int p0, int p1, float m0, float m1, float l0, float l1, int split, int j, int NS,
        long long wa, long long wb, float (&M)[2], float (&L)[2], float (&A)[NC][4], float* sm,
        float* sl, float* sa, int t) {
#pragma unroll
    for (int hh = 0; hh < 2; hh++) {
        const int p = hh ? p1 : p0;
        if (k0 > p) continue;
        if (!split || p < SPAN) {
            if (hh) fold<N>(M[1], L[1], A, 1, m1, l1, acc);
            else fold<N>(M[0], L[0], A, 0, m0, l0, acc);
        } else {
            const long long st = (hh ? wb : wa) * NS + j;
            if (writer) { sm[st] = hh ? m1 : m0; sl[st] = hh ? l1 : l0; }
#pragma unroll
            for (int i = 0; i < N; i++)
                *(float2*)(sa + st * HD + 8 * (dt0 + i) + 2 * t) =
                    make_float2(acc[i][2 * hh], acc[i][2 * hh + 1]);
        }
    }
}

#define NCW (NC / 4)         // d tiles a warp in a decode tile's P V
// One span of a decode tile (<= 16 pairs, the m-rows of every warp), the 4 warps sharing it:
// steps (1)-(7) of the definition with the same operations in the same order as the one-warp
// path (span_softmax and the P V chains), only spread over warps (see `dec` in attend).
__device__ __forceinline__ void dec_span(const bf16* qw, const bf16* qwl, const bf16* kb,
        const bf16* vb, int k0, int p0, int p1, float scale, int split, int j, int NS,
        long long wa, long long wb, float (&M)[2], float (&L)[2], float (&A)[NC][4], float* sm,
        float* sl, float* sa, float (&pm)[4][16], unsigned (&Ps)[16][33], unsigned (&Qs)[16][33]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    // (1) raw scores of key tiles 2w, 2w + 1, each chain as in the one-warp path
    float s[2][4];
#pragma unroll
    for (int i = 0; i < 2; i++) s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.f;
#pragma unroll
    for (int dp = 0; dp < HD / 32; dp++) {
        unsigned qa[2][4], qb[2][4];
        q_frags(qa, qb, qw, qwl, dp, lane);
#pragma unroll
        for (int i = 0; i < 2; i++) score_steps(s[i], qa, qb, kb, 2 * warp + i, dp, lane);
    }
    // (2), (3): scale, mask, the span max (exact in any order) through shared memory
    float m0 = NEG_INF, m1 = NEG_INF;
#pragma unroll
    for (int i = 0; i < 2; i++) scale_mask(s[i], k0 + 8 * (2 * warp + i) + 2 * t, p0, p1, scale, m0, m1);
    m0 = quad_max(m0);
    m1 = quad_max(m1);
    if (t == 0) { pm[warp][g] = m0; pm[warp][g + 8] = m1; }
    __syncthreads();
    m0 = fmaxf(fmaxf(pm[0][g], pm[1][g]), fmaxf(pm[2][g], pm[3][g]));
    m1 = fmaxf(fmaxf(pm[0][g + 8], pm[1][g + 8]), fmaxf(pm[2][g + 8], pm[3][g + 8]));
    // (4) this warp's weights, high and rest, to shared memory: word [row][4 nt + t]
#pragma unroll
    for (int i = 0; i < 2; i++) {
        const int nt = 2 * warp + i;
        weights(s[i], k0 + 8 * nt + 2 * t, p0, p1, m0, m1, Ps[g][4 * nt + t], Ps[g + 8][4 * nt + t],
                Qs[g][4 * nt + t], Qs[g + 8][4 * nt + t]);
    }
    __syncthreads();
    // (5) l, every warp the same bits: span_softmax's order
    float l0 = 0.f, l1 = 0.f;
#pragma unroll
    for (int nt = 0; nt < 8; nt++) {
        add_l(l0, Ps[g][4 * nt + t], Qs[g][4 * nt + t]);
        add_l(l1, Ps[g + 8][4 * nt + t], Qs[g + 8][4 * nt + t]);
    }
    l0 = quad_sum(l0);
    l1 = quad_sum(l1);
    // (6) acc of d tiles NCW w + i, each chain as in the one-warp path
    float acc[NCW][4];
#pragma unroll
    for (int i = 0; i < NCW; i++) acc[i][0] = acc[i][1] = acc[i][2] = acc[i][3] = 0.f;
#pragma unroll
    for (int kc = 0; kc < 4; kc++) {
        const int c0 = 4 * (2 * kc) + t, c1 = 4 * (2 * kc + 1) + t;
        const unsigned pa0 = Ps[g][c0], pa1 = Ps[g + 8][c0], pa2 = Ps[g][c1], pa3 = Ps[g + 8][c1];
        const unsigned qa0 = Qs[g][c0], qa1 = Qs[g + 8][c0], qa2 = Qs[g][c1], qa3 = Qs[g + 8][c1];
#pragma unroll
        for (int dl = 0; dl < NCW / 2; dl++) {
            const int dp = (NCW / 2) * warp + dl;
            unsigned vf[4];
            ldsm4t(vf, smem_u32(vb + sw(16 * kc + (lane & 7) + 8 * ((lane >> 3) & 1),
                                        2 * dp + (lane >> 4))));
            mma(acc[2 * dl], pa0, pa1, pa2, pa3, vf[0], vf[1]);
            mma(acc[2 * dl], qa0, qa1, qa2, qa3, vf[0], vf[1]);
            mma(acc[2 * dl + 1], pa0, pa1, pa2, pa3, vf[2], vf[3]);
            mma(acc[2 * dl + 1], qa0, qa1, qa2, qa3, vf[2], vf[3]);
        }
    }
    __syncthreads();                  // Ps, Qs, pm are read: the next span may rewrite them
    // (7) this warp's d tiles (M and L: every warp the same)
    span_end<NCW>(acc, NCW * warp, t == 0 && warp == 0, k0, p0, p1, m0, m1, l0, l1, split, j, NS,
                  wa, wb, M, L, A, sm, sl, sa, t);
}

// grid (tiles, kv heads, Z), 128 threads, dynamic shared memory (128 + 4 SPAN) HD bf16
extern "C" __global__ void __launch_bounds__(128, 2) attend(
        const float* __restrict__ q, const bf16* __restrict__ kp, const bf16* __restrict__ vp,
        const int* tables, int W, const int* slot, const int* pos, const int* tile_row,
        const int* tile_n, int P, int NQ, int KV, int G, float scale, bf16* out,
        int split, int NS, float* sm, float* sl, float* sa) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    bf16* qs = (bf16*)smem_raw;                    // [64 pairs][HD]: q's high bf16
    bf16* ql = qs + 64 * HD;                       // [64 pairs][HD]: q - high, as bf16
    bf16* ks = ql + 64 * HD;                       // [2][SPAN keys][HD]
    bf16* vs = ks + 2 * SPAN * HD;                 // [2][SPAN keys][HD]
    pdl_trigger();
    pdl_wait();                                   // q, the pools and the map: after this
    const int kvh = blockIdx.y, r0 = tile_row[blockIdx.x], nr = tile_n[blockIdx.x];
    const int s = slot[r0], pmax = pos[r0 + nr - 1];
    const int z = split ? blockIdx.z : 0, zstep = split ? gridDim.z : 1;
    if (z > 0 && (long long)z * SPAN > pmax) return;          // no span of this block: uniform
    const int npairs = nr * G, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    // the pairs' queries, bf16 (RNE), swizzled; pairs past npairs are zero
    for (int i = tid; i < 64 * NC; i += 128) {
        const int pr = i / NC, c = i % NC;
        uint4 w = make_uint4(0u, 0u, 0u, 0u), v = w;
        if (pr < npairs) {
            const float4* src = (const float4*)(q + ((long long)(r0 + pr / G) * NQ + kvh * G + pr % G) * HD + 8 * c);
            const float4 a = src[0], b = src[1];
            w = make_uint4(pack_bf16(a.x, a.y), pack_bf16(a.z, a.w), pack_bf16(b.x, b.y),
                           pack_bf16(b.z, b.w));
            v = make_uint4(rest_bf16(a.x, a.y, w.x), rest_bf16(a.z, a.w, w.y),
                           rest_bf16(b.x, b.y, w.z), rest_bf16(b.z, b.w, w.w));
        }
        *(uint4*)(qs + sw(pr, c)) = w;
        *(uint4*)(ql + sw(pr, c)) = v;
    }
    // decode tiles (16 pairs or fewer: one warp's m-rows) share each span among the 4 warps:
    // warp w takes key tiles 2w, 2w + 1 of the scores and d tiles NCW w .. of P V, and the
    // span's max, weights and l go through shared memory, in the same order (scheduling only)
    const bool dec = npairs <= 16;
    __shared__ float pm[4][16];                               // dec: each warp's span maxima
    __shared__ unsigned Ps[16][33], Qs[16][33];               // dec: the span's P, rest words
    const int w0 = dec ? 0 : 16 * warp;                       // this warp's first m-row pair
    const int pa = w0 + g, pb = pa + 8;                       // this thread's two m-rows
    const int p0 = pa < npairs ? pos[r0 + pa / G] : -1;
    const int p1 = pb < npairs ? pos[r0 + pb / G] : -1;
    const int wl = min(w0 + 15, npairs - 1);
    const int wpmax = wl >= w0 ? pos[r0 + wl / G] : -1;       // the warp's last row
    const long long wa = (long long)(r0 + pa / G) * NQ + kvh * G + pa % G;   // (row, head) index
    const long long wb = (long long)(r0 + pb / G) * NQ + kvh * G + pb % G;
    const int* tab = tables + (long long)s * W;
    // span j's K and V into buffer b: keys past the tile's last row are zero (V must be finite).
    // Thread tid copies chunk tid % NC of rows tid / NC + RS u; the page of a key by a shift
    // where the page rows are a power of two (a division was ~a quarter of the loop's
    // instructions), 64-bit math only for the page's base
    constexpr int RS = 128 / NC;                               // rows a pass of the block
    static_assert(RS % 8 == 0, "a pass keeps a row's swizzle phase");
    const int r_ld = tid / NC, c_ld = tid % NC, sw_ld = sw(r_ld, c_ld);
    const int pshift = (P & (P - 1)) == 0 ? __ffs(P) - 1 : -1;
    const long long page_el = (long long)P * KV * HD;
    const int in_page = kvh * HD + 8 * c_ld;
    auto load = [&](int j, int b) {
        const int k0 = j * SPAN, kend = min(pmax, k0 + SPAN - 1);
        bf16* kd = ks + b * SPAN * HD + sw_ld;
        bf16* vd = vs + b * SPAN * HD + sw_ld;
#pragma unroll
        for (int u = 0; u < SPAN / RS; u++) {
            const int key = k0 + r_ld + RS * u;
            const bool ok = key <= kend;
            const int pg = pshift >= 0 ? key >> pshift : key / P;
            const long long off = ok ? (long long)tab[pg] * page_el + (key - pg * P) * (KV * HD) + in_page : 0;
            cp16z(smem_u32(kd + RS * u * HD), kp + off, ok);
            cp16z(smem_u32(vd + RS * u * HD), vp + off, ok);
        }
    };
    float M[2] = {NEG_INF, NEG_INF}, L[2] = {0.f, 0.f}, A[NC][4];
#pragma unroll
    for (int dt = 0; dt < NC; dt++) A[dt][0] = A[dt][1] = A[dt][2] = A[dt][3] = 0.f;
    const int nsp = pmax < 0 ? 0 : pmax / SPAN + 1;           // spans of the tile's last row
    if (PF_ && z < nsp) load(z, 0);
    cp_commit();
    int it = 0;
    for (int j = z; j < nsp; j += zstep, it++) {
        const int b = PF_ ? (it & 1) : 0;
        if (!PF_) {
            __syncthreads();                                  // the last span is done with
            load(j, 0);
            cp_commit();
        }
        cp_wait_all();
        __syncthreads();                                      // span j landed; j - zstep done
        if (PF_ && j + zstep < nsp) load(j + zstep, b ^ 1);
        if (PF_) cp_commit();
        const int k0 = j * SPAN;
        if (k0 > wpmax) continue;                             // warp-uniform: no row reaches j
        const bf16* kb = ks + b * SPAN * HD;
        const bf16* vb = vs + b * SPAN * HD;
        const bf16* qw = qs + w0 * HD;
        const bf16* qwl = ql + w0 * HD;
        if (dec) {
            dec_span(qw, qwl, kb, vb, k0, p0, p1, scale, split, j, NS, wa, wb, M, L, A, sm, sl, sa,
                     pm, Ps, Qs);
            continue;
        }
        // (1) raw scores: each s[nt] gets the d chunks 0, 1, .., HD/16 - 1 in order
        float s[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.f;
#pragma unroll
        for (int dp = 0; dp < HD / 32; dp++) {                // d chunks 2dp, 2dp + 1
            unsigned qa[2][4], qb[2][4];
            q_frags(qa, qb, qw, qwl, dp, lane);
#pragma unroll
            for (int nt = 0; nt < 8; nt++) score_steps(s[nt], qa, qb, kb, nt, dp, lane);
        }
        // (2)-(5)
        unsigned Pw[8][2], Qw[8][2];
        float m0, m1, l0, l1;
        if (__all_sync(FULL, k0 + SPAN - 1 <= min(p0, p1)))   // below the diagonal: no masks
            span_softmax<false>(s, p0, p1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        else
            span_softmax(s, p0, p1, k0, t, scale, Pw, Qw, m0, m1, l0, l1);
        // (6) acc = P V: each acc[dt] gets the key chunks 0..3 in order
        float acc[NC][4];
#pragma unroll
        for (int dt = 0; dt < NC; dt++) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.f;
#pragma unroll
        for (int kc = 0; kc < 4; kc++) {
#pragma unroll
            for (int dp = 0; dp < NC / 2; dp++) {             // d tiles 2dp, 2dp + 1
                unsigned vf[4];
                ldsm4t(vf, smem_u32(vb + sw(16 * kc + (lane & 7) + 8 * ((lane >> 3) & 1),
                                            2 * dp + (lane >> 4))));
                mma(acc[2 * dp], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0],
                    Pw[2 * kc + 1][1], vf[0], vf[1]);
                mma(acc[2 * dp], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0],
                    Qw[2 * kc + 1][1], vf[0], vf[1]);
                mma(acc[2 * dp + 1], Pw[2 * kc][0], Pw[2 * kc][1], Pw[2 * kc + 1][0],
                    Pw[2 * kc + 1][1], vf[2], vf[3]);
                mma(acc[2 * dp + 1], Qw[2 * kc][0], Qw[2 * kc][1], Qw[2 * kc + 1][0],
                    Qw[2 * kc + 1][1], vf[2], vf[3]);
            }
        }
        // (7) rows with a key in this span: fold here, or hand the state on (split, >= 2 spans)
        span_end<NC>(acc, 0, t == 0, k0, p0, p1, m0, m1, l0, l1, split, j, NS, wa, wb, M, L, A,
                     sm, sl, sa, t);
    }
    cp_wait_all();
    // split: rows of two spans or more are folded by `fold_spans` (launched next); the span-0
    // block writes the rest (rows of one span, padding)
    if (split && z != 0) return;

    // rows of one span (every row in-block; split: those and padding, by the span-0 block)
    if (dec) {                                                // d tiles NCW w .. NCW w + NCW - 1
        if (pa < npairs && !(split && p0 >= SPAN)) finish<NCW>(A, L[0], 0, t, p0 < 0, out + wa * HD, NCW * warp);
        if (pb < npairs && !(split && p1 >= SPAN)) finish<NCW>(A, L[1], 1, t, p1 < 0, out + wb * HD, NCW * warp);
        return;
    }
    if (pa < npairs && !(split && p0 >= SPAN)) finish<NC>(A, L[0], 0, t, p0 < 0, out + wa * HD);
    if (pb < npairs && !(split && p1 >= SPAN)) finish<NC>(A, L[1], 1, t, p1 < 0, out + wb * HD);
}

// Split mode's fold of each (row, head) pair's span states, spans 0, 1, 2, ... in order: the
// same operations as step (7) in the same order, spread so that no long chain waits on memory.
// The running max of span j is a prefix max (exact in any order), so span j's scales
// ca = expf(M_{j-1} - M_j), cb = expf(m_j - M_j) are computed for 32 spans at once; the
// sums L = L ca + l cb and A = A ca + acc cb then run in span order, one element a lane,
// from shared memory, while the block's other warps copy the next FCH spans' states in.
// grid (T x NQ pairs, HD / 32 elements), 256 threads; rows with p < SPAN (or padding) return.
#define FCH 128
extern "C" __global__ void __launch_bounds__(256) fold_spans(
        const int* pos, int NQ, int NS, const float* sm, const float* sl, const float* sa,
        bf16* out) {
    __shared__ __align__(16) float as[2][FCH][32];
    __shared__ float ms[2][FCH], ls[2][FCH], cas[FCH], cbs[FCH];
    pdl_trigger();
    pdl_wait();                                   // attend's span states: after this
    const long long w = blockIdx.x;
    const int p = pos[w / NQ];
    if (p < SPAN) return;
    const int ns = p / SPAN + 1, d0 = 32 * blockIdx.y, tid = threadIdx.x, lane = tid & 31;
    const int warp = tid >> 5;
    const long long st0 = w * NS;
    auto load = [&](int c0, int b, int t0, int nt) {          // spans c0 .. into buffer b
        const int n = min(FCH, ns - c0);
        for (int i = t0; i < n * 8; i += nt) {
            const int j = i >> 3, e = 4 * (i & 7);
            cp16z(smem_u32(&as[b][j][e]), sa + (st0 + c0 + j) * HD + d0 + e, true);
        }
        cp_commit();
        for (int i = t0; i < n; i += nt) {
            ms[b][i] = __ldcg(sm + st0 + c0 + i);
            ls[b][i] = __ldcg(sl + st0 + c0 + i);
        }
        cp_wait_all();
    };
    float M = NEG_INF, L = 0.f, A = 0.f;
    load(0, 0, tid, 256);
    __syncthreads();
    const int nch = (ns + FCH - 1) / FCH;
    for (int k = 0; k < nch; k++) {
        const int b = k & 1, n = min(FCH, ns - k * FCH);
        if (warp > 0) {
            if (k + 1 < nch) load((k + 1) * FCH, b ^ 1, tid - 32, 224);
        } else {
            for (int b0 = 0; b0 < n; b0 += 32) {
                const int j = b0 + lane;
                const float m = j < n ? ms[b][j] : NEG_INF;
                float x = m;                                    // inclusive prefix max
#pragma unroll
                for (int o = 1; o < 32; o <<= 1) {
                    const float y = __shfl_up_sync(FULL, x, o);
                    if (lane >= o) x = fmaxf(x, y);
                }
                const float inc = fmaxf(M, x);                  // M_j
                float exc = __shfl_up_sync(FULL, inc, 1);       // M_{j-1}
                if (lane == 0) exc = M;
                if (j < n) {
                    float mn, ca, cb;
                    fold_scales(exc, m, mn, ca, cb);
                    cas[j] = ca;
                    cbs[j] = cb;
                }
                M = __shfl_sync(FULL, inc, 31);
            }
            __syncwarp();
#pragma unroll 8
            for (int j = 0; j < n; j++) {
                const float ca = cas[j], cb = cbs[j];
                L = fold_el(L, ls[b][j], ca, cb);
                A = fold_el(A, as[b][j][lane], ca, cb);
            }
        }
        __syncthreads();
    }
    if (warp == 0) out[w * HD + out_at1(d0 + lane)] = (bf16)(pack_bf16(out_el(A, L), 0.f) & 0xffffu);
}
