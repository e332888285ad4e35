
#define NT 1024
#define FLT_MAX_ __int_as_float(0x7f7fffff)
#define NEG_INF __int_as_float(0xff800000)
#define POS_INF __int_as_float(0x7f800000)

__device__ __forceinline__ double exp_(double d) {
    if (!(d >= EXP_FLOOR)) return 0.0;
    const long long ki = __double2ll_rn(__dmul_rn(d, INV_LN2));   // nearest, ties to even
    const double k = (double)ki;
    const double r = __dsub_rn(__dsub_rn(d, __dmul_rn(k, LN2_HI)), __dmul_rn(k, LN2_LO));
    double p = C12;
    POLY
    const double s = __longlong_as_double((ki + 1023) << 52);
    return __dmul_rn(p, s);
}
__device__ __forceinline__ float san(float x) {
    x = __fadd_rn(x, 0.0f);
    if (x != x) return NEG_INF;
    if (x == POS_INF) return FLT_MAX_;
    return x;
}
__device__ __forceinline__ unsigned key(float x) {
    const unsigned u = __float_as_uint(x);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}
__device__ __forceinline__ unsigned long long mix(unsigned long long z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
// the butterfly within each warp, then over the 32 warp sums: every thread gets the same bits
__device__ double bsum(double v, double* ws) {
    for (int o = 16; o; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(FULL, v, o));
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = ws[threadIdx.x & 31];
    for (int o = 16; o; o >>= 1) v = __dadd_rn(v, __shfl_xor_sync(FULL, v, o));
    __syncthreads();
    return v;
}
__device__ long long bcount(long long v, long long* ws) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = ws[threadIdx.x & 31];
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    __syncthreads();
    return v;
}
__device__ float bmax(float v, float* ws) {
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) ws[threadIdx.x >> 5] = v;
    __syncthreads();
    v = warp_max(ws[threadIdx.x & 31]);
    __syncthreads();
    return v;
}

// ip [n, 5] uint64: row, top_k, seed, salt, step; fp [n, 3] float64: temperature, top_p, min_p
extern "C" __global__ void __launch_bounds__(NT)
sample_rows(const float* logits, long long V, const unsigned long long* ip, const double* fp,
            int* out) {
    __shared__ double ws[32];
    __shared__ long long wc[32];
    __shared__ float wf[32];
    __shared__ double acc_s[NT];
    const int tid = threadIdx.x;
    const unsigned long long* q = ip + 5 * (long long)blockIdx.x;
    const double* f = fp + 3 * (long long)blockIdx.x;
    const float* x = logits + (long long)q[0] * V;
    const long long K = (long long)q[1];
    const double T = f[0], P = f[1];
    const double Mp = f[2] > 1.0 ? 1.0 : (f[2] > 0.0 ? f[2] : 0.0);

    float mx = NEG_INF;
    for (long long i = tid; i < V; i += NT) mx = fmaxf(mx, san(x[i]));
    mx = bmax(mx, wf);
    if (mx == NEG_INF) { if (tid == 0) out[blockIdx.x] = 0; return; }
    const double m = __ddiv_rn((double)mx, T);
    const unsigned kmax = key(mx);

    unsigned long long lo = 0, hi = kmax;             // top-k: the K-th largest key
    if (K > 0 && K < V) {
        while (lo < hi) {
            const unsigned long long mid = lo + (hi - lo + 1) / 2;
            long long c = 0;
            for (long long i = tid; i < V; i += NT) c += key(san(x[i])) >= mid;
            if (bcount(c, wc) >= K) lo = mid; else hi = mid - 1;
        }
    }
    const unsigned long long tk = lo;

    unsigned long long tp = tk;                       // top-p: the largest t with S(t) >= P S(tk)
    if (P < 1.0) {
        double target = 0.0;
        unsigned long long t = tk;
        lo = tk; hi = kmax;
        bool first = true;
        while (true) {
            if (!first) { if (lo >= hi) break; t = lo + (hi - lo + 1) / 2; }
            double a = 0.0;
            for (long long i = tid; i < V; i += NT) {
                const float xi = san(x[i]);
                const unsigned k = key(xi);
                if (k >= t && k >= tk) {
                    const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
                    if (w >= Mp) a = __dadd_rn(a, w);
                }
            }
            const double s = bsum(a, ws);
            if (first) { target = __dmul_rn(P, s); first = false; continue; }
            if (s >= target && s > 0.0) lo = t; else hi = t - 1;
        }
        tp = lo;
    }

    double a = 0.0;                                   // the draw
    for (long long i = tid; i < V; i += NT) {
        const float xi = san(x[i]);
        const unsigned k = key(xi);
        if (k >= tp) {
            const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
            if (w >= Mp) a = __dadd_rn(a, w);
        }
    }
    acc_s[tid] = a;
    __syncthreads();
    if (tid != 0) return;
    double c = 0.0;
    for (int t = 0; t < NT; t++) { c = __dadd_rn(c, acc_s[t]); acc_s[t] = c; }
    const unsigned long long h = mix(mix(mix(q[2]) ^ q[3]) ^ q[4]);
    const double u = __dmul_rn((double)(h >> 11), __longlong_as_double(0x3CA0000000000000LL));
    const double target = __dmul_rn(u, c);
    int j = -1;
    for (int t = 0; t < NT; t++) if (acc_s[t] > target) { j = t; break; }
    if (j < 0)
        for (int t = NT - 1; t >= 0; t--)
            if (acc_s[t] > (t ? acc_s[t - 1] : 0.0)) { j = t; break; }
    if (j < 0) j = 0;                                 // no mass at all: cannot happen (top weighs 1)
    c = j > 0 ? acc_s[j - 1] : 0.0;
    long long last = -1;
    for (long long i = j; i < V; i += NT) {
        const float xi = san(x[i]);
        if (key(xi) >= tp) {
            const double w = exp_(__dsub_rn(__ddiv_rn((double)xi, T), m));
            if (w >= Mp && w > 0.0) {
                last = i;
                c = __dadd_rn(c, w);
                if (c > target) break;
            }
        }
    }
    out[blockIdx.x] = (int)last;
}
