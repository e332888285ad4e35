#define NT 1024
#define NW (NT / 32)
#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)
#define NO_MASK 0xffffffffffffffffull
typedef unsigned long long u64;

__device__ __forceinline__ float expf_(float d) {
    if (!(d >= EXP_FLOOR)) return 0.0f;
    const float k = rintf(__fmul_rn(d, INV_LN2));
    const float r = __fsub_rn(__fsub_rn(d, __fmul_rn(k, LN2_HI)), __fmul_rn(k, LN2_LO));
    float p = C7;
    POLY
    const float s = __int_as_float(((int)k + 127) << 23);
    return __fmul_rn(p, s);
}
__device__ __forceinline__ unsigned key(float x) {
    const unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ float unkey(unsigned k) {
    return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}
__device__ __forceinline__ u64 mix(u64 z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// q = floor(w * 2^44) of a shaped logit v (the top one m), 0 under min-p
__device__ __forceinline__ u64 qw(float v, float m, float T, float Mp) {
    const float w = expf_(__fdiv_rn(__fsub_rn(v, m), T));
    return w >= Mp ? __float2ull_rz(__fmul_rn(w, 17592186044416.0f)) : 0ull;
}
__device__ __forceinline__ u64 warp_sum64(u64 v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}

// Tokens i0 + 0..3 and i0 + 4 NT + 0..3 of x: two float4 loads where the row allows (so a
// thread has 8 loads in flight: a pass over 128k logits is not bound by one load's latency);
// past V: -inf.
__device__ __forceinline__ void load8(const float* x, int V, int i0, bool vec, float* v) {
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = i0 + h * 4 * NT;
        if (vec && i + 3 < V) {
            const float4 f = *reinterpret_cast<const float4*>(x + i);
            v[4 * h] = f.x; v[4 * h + 1] = f.y; v[4 * h + 2] = f.z; v[4 * h + 3] = f.w;
        } else {
#pragma unroll
            for (int c = 0; c < 4; c++) v[4 * h + c] = i + c < V ? x[i + c] : NEG_INF;
        }
    }
}
__device__ __forceinline__ int idx8(int i0, int u) { return i0 + (u >> 2) * 4 * NT + (u & 3); }

// The row's histogram of one byte of the key (shift 24, 16, 8, 0) over the tokens whose
// higher bytes equal those of `prefix`: counts and masses, in shared memory. Integer sums:
// the same in any order. Each warp adds into its own histogram (hcw/hmw: dynamic shared
// memory, 32 x 256), its lanes that fall in one bin as one (__match_any_sync): no atomics
// and no contention on the bin most tokens share (the first byte: sign and exponent); then
// the 32 are summed into hc/hm.
__device__ void histo(const float* x, int V, bool vec, unsigned prefix, int shift, float m,
                      float T, float Mp, unsigned* hc, u64* hm, unsigned* hcw, u64* hmw) {
    for (int i = threadIdx.x; i < 32 * 256; i += NT) { hcw[i] = 0; hmw[i] = 0; }
    __syncthreads();
    const unsigned hi = shift == 24 ? 0u : (prefix >> (shift + 8));
    const int lane = threadIdx.x & 31;
    unsigned* mc = hcw + 256 * (threadIdx.x >> 5);
    u64* mm = hmw + 256 * (threadIdx.x >> 5);
    for (int b = 0; b < V; b += 8 * NT) {             // the same trip count for every thread
        const int i0 = b + 4 * threadIdx.x;
        float v[8];
        load8(x, V, i0, vec, v);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            unsigned d = 256;                         // 256: not counted here
            u64 q = 0;
            if (idx8(i0, u) < V) {
                const float y = __fadd_rn(v[u], 0.0f);
                const unsigned k = key(y);
                if (shift == 24 || (k >> (shift + 8)) == hi) {
                    d = (k >> shift) & 255u;
                    q = qw(y, m, T, Mp);
                }
            }
            const unsigned peers = __match_any_sync(FULL, d);
            // q <= 2^44: 22-bit halves, so 32 of each fit a uint32 sum
            const unsigned slo = __reduce_add_sync(peers, (unsigned)(q & 0x3fffffu));
            const unsigned shi = __reduce_add_sync(peers, (unsigned)(q >> 22));
            if (d < 256 && lane == __ffs(peers) - 1) {   // one lane a bin: no race
                mc[d] += (unsigned)__popc(peers);
                mm[d] += ((u64)shi << 22) + slo;
            }
            __syncwarp();
        }
    }
    __syncthreads();
    for (int d = threadIdx.x; d < 256; d += NT) {
        unsigned c = 0;
        u64 w = 0;
        for (int k = 0; k < 32; k++) { c += hcw[256 * k + d]; w += hmw[256 * k + d]; }
        hc[d] = c;
        hm[d] = w;
    }
    __syncthreads();
}

// The largest byte d with pred(base + sum of h[d..255]), given pred(base + sum of h[0..255]);
// pred: count mode (c >= K) or mass mode (double(c) >= target and c > 0). Returns d; *above
// = base + sum of h[d+1..255]. Warp 0 works, lane l owns bins 8l..8l+7; all threads return.
__device__ int find(const unsigned* hc, const u64* hm, bool count, u64 base, long long K,
                    double target, u64* above, int* sd, u64* sa) {
    if (threadIdx.x < 32) {
        const int l = threadIdx.x;
        u64 t = 0;
        for (int j = 0; j < 8; j++) t += count ? (u64)hc[8 * l + j] : hm[8 * l + j];
        u64 s = t;                                    // suffix sum over lanes l..31
        for (int o = 1; o < 32; o <<= 1) {
            const u64 n = __shfl_down_sync(FULL, s, o);
            if (l + o < 32) s += n;
        }
        const u64 c = base + s;
        const bool ok = count ? (long long)c >= K : ((double)c >= target && c > 0);
        const unsigned b = __ballot_sync(FULL, ok);
        const int ls = b ? 31 - __clz(b) : 0;
        if (l == ls) {
            u64 run = c - t;                          // base + the lanes above
            int d = 8 * l;
            for (int j = 7; j >= 0; j--) {
                const u64 h = count ? (u64)hc[8 * l + j] : hm[8 * l + j];
                const u64 nx = run + h;
                const bool okj = count ? (long long)nx >= K : ((double)nx >= target && nx > 0);
                if (okj) { d = 8 * l + j; break; }
                run = nx;
            }
            *sd = d;
            *sa = run;
        }
    }
    __syncthreads();
    const int d = *sd;
    *above = *sa;
    __syncthreads();
    return d;
}

// sum of hm[d..255] (all threads get it)
__device__ u64 mass_from(const u64* hm, int d, u64* sa) {
    if (threadIdx.x < 32) {
        u64 t = 0;
        for (int j = threadIdx.x; j < 256; j += 32) if (j >= d) t += hm[j];
        t = warp_sum64(t);
        if (threadIdx.x == 0) *sa = t;
    }
    __syncthreads();
    const u64 v = *sa;
    __syncthreads();
    return v;
}

// ip [n, 8] uint64: row, top_k, seed, salt, step, adj offset, adj count, mask offset (words;
// NO_MASK = none). fp [n, 8] float64: temperature, top_p, min_p, rep, presence, frequency,
// plain (1: nothing shapes the row and nothing reads its values: np.argmax's rule).
// ai [A, 3] int32: token, count, flags (1 seen, 2 banned); ab [A] float32: bias.
// mw: uint32 mask words. scratch [n, V] float32: the shaped rows (only rows that need one).
extern "C" __global__ void __launch_bounds__(NT)
sample_rows(const float* logits, int V, const u64* ip, const double* fp, const int* ai,
            const float* ab, const unsigned* mw, float* scratch, int* out) {
    extern __shared__ u64 dyn[];                      // 32 warps' histograms (SMEM bytes)
    u64* hmw = dyn;
    unsigned* hcw = reinterpret_cast<unsigned*>(dyn + 32 * 256);
    __shared__ unsigned hc[256];
    __shared__ u64 hm[256];
    __shared__ u64 h1m[256];
    __shared__ unsigned wk[NW];
    __shared__ int wi[NW], wbad[NW], wn[NW];
    __shared__ u64 wsum[NW];
    __shared__ u64 tsum[NW];
    __shared__ int sd, sw;
    __shared__ u64 sa, sb;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const u64* q = ip + 8 * (long long)blockIdx.x;
    const double* f = fp + 8 * (long long)blockIdx.x;
    const float* x = logits + (long long)q[0] * V;
    const long long K = (long long)q[1];
    const float T = (float)f[0];
    const double P = f[1];
    const float Mp = f[2] > 1.0 ? 1.0f : (f[2] > 0.0 ? (float)f[2] : 0.0f);
    const long long na = (long long)q[6];
    const u64 mo = q[7];
    const bool plain = f[6] != 0.0;                   // greedy on the raw logits, numpy's way

    if (na > 0 || mo != NO_MASK) {                    // 1. shaping, into this row's scratch
        float* y = scratch + (long long)blockIdx.x * V;
#pragma unroll 8
        for (int i = tid; i < V; i += NT) {
            float v = x[i];
            if (mo != NO_MASK && !((mw[mo + (i >> 5)] >> (i & 31)) & 1u)) v = NEG_INF;
            y[i] = v;
        }
        __syncthreads();
        const float rep = (float)f[3], pres = (float)f[4], freq = (float)f[5];
        for (long long a = tid; a < na; a += NT) {
            const int* e = ai + 3 * ((long long)q[5] + a);
            const int t = e[0];
            if (t < 0 || t >= V) continue;
            float v = x[t];
            if (e[2] & 1) v = v > 0.0f ? __fdiv_rn(v, rep) : __fmul_rn(v, rep);
            if (e[1] > 0) v = __fsub_rn(v, __fadd_rn(__fmul_rn(freq, (float)e[1]), pres));
            v = __fadd_rn(v, ab[q[5] + a]);
            if (e[2] & 2) v = NEG_INF;
            if (mo != NO_MASK && !((mw[mo + (t >> 5)] >> (t & 31)) & 1u)) v = NEG_INF;
            y[t] = v;
        }
        __syncthreads();
        x = y;
    }
    const bool vec = (V & 3) == 0 && (reinterpret_cast<size_t>(x) & 15) == 0;

    // 2, 3. the largest key and its first index, the first NaN, any +inf
    unsigned bk = 0;
    int bi = V, ni = V, bad = 0;
    for (int i0 = 4 * tid; i0 < V; i0 += 8 * NT) {
        float vv[8];
        load8(x, V, i0, vec, vv);
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const int i = idx8(i0, u);
            if (i >= V) continue;
            const float v = __fadd_rn(vv[u], 0.0f);
            if (v != v) { bad = 1; ni = min(ni, i); }
            if (v == POS_INF) bad = 1;
            const unsigned k = key(v);
            if (k > bk) { bk = k; bi = i; }
        }
    }
    for (int o = 16; o; o >>= 1) {
        const unsigned ok = __shfl_xor_sync(FULL, bk, o);
        const int oi = __shfl_xor_sync(FULL, bi, o);
        if (ok > bk || (ok == bk && oi < bi)) { bk = ok; bi = oi; }
        bad |= __shfl_xor_sync(FULL, bad, o);
        ni = min(ni, __shfl_xor_sync(FULL, ni, o));
    }
    if (lane == 0) { wk[warp] = bk; wi[warp] = bi; wbad[warp] = bad; wn[warp] = ni; }
    __syncthreads();
    if (warp == 0) {
        bk = wk[lane]; bi = wi[lane]; bad = wbad[lane]; ni = wn[lane];
        for (int o = 16; o; o >>= 1) {
            const unsigned ok = __shfl_xor_sync(FULL, bk, o);
            const int oi = __shfl_xor_sync(FULL, bi, o);
            if (ok > bk || (ok == bk && oi < bi)) { bk = ok; bi = oi; }
            bad |= __shfl_xor_sync(FULL, bad, o);
            ni = min(ni, __shfl_xor_sync(FULL, ni, o));
        }
        if (lane == 0) { wk[0] = bk; wi[0] = bi; wbad[0] = bad; wn[0] = ni; }
    }
    __syncthreads();
    const unsigned kmax = wk[0];
    const bool greedy = !(T >= MIN_T);
    if (greedy && plain) {                            // numpy's arg-max: the first NaN wins
        if (tid == 0) out[blockIdx.x] = wn[0] < V ? wn[0] : wi[0];
        return;
    }
    if (wbad[0]) { if (tid == 0) out[blockIdx.x] = -2; return; }
    if (kmax <= key(NEG_INF)) { if (tid == 0) out[blockIdx.x] = -1; return; }
    if (greedy) { if (tid == 0) out[blockIdx.x] = wi[0]; return; }
    const float m = unkey(kmax);

    const bool topk = K > 0 && K < V, topp = P < 1.0;
    unsigned tk = 0, tp = 0;
    u64 Stk = 0;                                      // S(tk), once known
    if (topk || topp) {                               // 5. the first byte: counts and masses
        histo(x, V, vec, 0u, 24, m, T, Mp, hc, hm, hcw, hmw);
        for (int i = tid; i < 256; i += NT) h1m[i] = hm[i];
        __syncthreads();
        if (topk) {
            u64 cb = 0, mb = 0;
            unsigned pre = 0;
            for (int shift = 24; shift >= 0; shift -= 8) {
                if (shift != 24) histo(x, V, vec, pre, shift, m, T, Mp, hc, hm, hcw, hmw);
                u64 above;
                const int d = find(hc, hm, true, cb, K, 0.0, &above, &sd, &sa);
                mb += mass_from(hm, d + 1, &sb);        // the mass strictly above bin d
                cb = above;
                pre |= (unsigned)d << shift;
                if (shift == 0) Stk = mb + hm[d];       // S(tk): keys above tk, and tk's own
            }
            tk = pre;
        } else {
            Stk = mass_from(h1m, 0, &sb);
        }
        tp = tk;
        if (topp) {                                   // 6. top-p, a byte at a time
            const double target = __dmul_rn(P, __ull2double_rn(Stk));
            u64 mb = 0;
            unsigned pre = 0;
            for (int shift = 24; shift >= 0; shift -= 8) {
                if (shift != 24) histo(x, V, vec, pre, shift, m, T, Mp, hc, hm, hcw, hmw);
                u64 above;
                const int d = find(hc, shift == 24 ? h1m : hm, false, mb, 0, target, &above,
                                   &sd, &sa);
                mb = above;
                pre |= (unsigned)d << shift;
            }
            tp = pre;
        }
    }

    // 7. the draw. (a) warp w's mass over tokens [w CW, (w + 1) CW) (CW a multiple of 128:
    // lanes read float4s in turn); thread 0 finds the warp whose running sum crosses r.
    const int CW = ((V + NW - 1) / NW + 127) / 128 * 128;
    const int lo = warp * CW, hi = min(V, lo + CW);
    u64 s = 0;
    for (int i0 = lo + 4 * lane; i0 < hi; i0 += 256) {
        float vv[8];
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int i = i0 + 128 * h;
            if (vec && i + 3 < hi) {
                const float4 f = *reinterpret_cast<const float4*>(x + i);
                vv[4 * h] = f.x; vv[4 * h + 1] = f.y; vv[4 * h + 2] = f.z; vv[4 * h + 3] = f.w;
            } else {
#pragma unroll
                for (int c = 0; c < 4; c++) vv[4 * h + c] = i + c < hi ? x[i + c] : NEG_INF;
            }
        }
#pragma unroll
        for (int u = 0; u < 8; u++) {
            const float v = __fadd_rn(vv[u], 0.0f);
            if (key(v) >= tp) s += qw(v, m, T, Mp);   // -inf (past hi) weighs 0
        }
    }
    s = warp_sum64(s);
    if (lane == 0) wsum[warp] = s;
    __syncthreads();
    if (tid == 0) {
        u64 R = 0;
        for (int w = 0; w < NW; w++) R += wsum[w];
        const u64 h = mix(mix(mix(q[2]) ^ q[3]) ^ q[4]);
        const u64 a = h >> 11;
        const u64 r = (__umul64hi(a, R) << 11) | ((a * R) >> 53);
        u64 c = 0;
        int w = 0;
        for (; w < NW; w++) { if (c + wsum[w] > r) break; c += wsum[w]; }
        sw = w; sa = c; sb = r;
        out[blockIdx.x] = -3;                         // overwritten below (a barrier later)
    }
    __syncthreads();
    const int w = sw;
    if (w >= NW) { if (tid == 0) out[blockIdx.x] = -3; return; }   // cannot happen: r < R
    // (b) that warp's tokens split among all threads, SC each in order; a block scan of the
    // thread sums; the one thread whose range crosses r walks its tokens.
    const u64 c0 = sa, r = sb;
    const int lo2 = w * CW, hi2 = min(V, lo2 + CW);
    const int SC = (CW + NT - 1) / NT;
    const int t0 = lo2 + tid * SC, t1 = min(hi2, t0 + SC);
    u64 e = 0;
    for (int i = t0; i < t1; i++) {
        const float v = __fadd_rn(x[i], 0.0f);
        if (key(v) >= tp) e += qw(v, m, T, Mp);
    }
    u64 inc = e;                                      // inclusive scan within the warp
    for (int o = 1; o < 32; o <<= 1) {
        const u64 n = __shfl_up_sync(FULL, inc, o);
        if (lane >= o) inc += n;
    }
    if (lane == 31) tsum[warp] = inc;
    __syncthreads();
    if (warp == 0) {                                  // the warps' totals, scanned exclusive
        const u64 t = tsum[lane];
        u64 x2 = t;
        for (int o = 1; o < 32; o <<= 1) {
            const u64 n = __shfl_up_sync(FULL, x2, o);
            if (lane >= o) x2 += n;
        }
        tsum[lane] = x2 - t;
    }
    __syncthreads();
    const u64 before = c0 + tsum[warp] + inc - e;
    if (e > 0 && before <= r && r < before + e) {
        u64 c = before;
        for (int i = t0; i < t1; i++) {
            const float v = __fadd_rn(x[i], 0.0f);
            if (key(v) >= tp) {
                c += qw(v, m, T, Mp);
                if (c > r) { out[blockIdx.x] = i; return; }
            }
        }
    }
}
