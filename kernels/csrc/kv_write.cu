
extern "C" __global__ void kv_write(const float* k, long long ks, const float* v, long long vs,
                                    bf16* kp, bf16* vp, const int* tables, int W,
                                    const int* slot, const int* pos, int P, int T, int RW) {
    const long long n = (long long)T * RW;              // RW = KV * hd
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const long long t = idx / RW; const int d = idx % RW;
        const int p = pos[t];
        if (p < 0) continue;
        const long long page = tables[(long long)slot[t] * W + p / P];
        const long long dst = (page * P + p % P) * RW + d;
        kp[dst] = f2b(k[t * ks + d]);
        vp[dst] = f2b(v[t * vs + d]);
    }
}

// qkv [T, (NQ + 2 KV) hd] rows (stride rs): heads 0..NQ-1 are q, then KV k heads, KV v heads
extern "C" __global__ void rope_kv_write(const float* qkv, long long rs, const float* inv,
                                         float* q, bf16* kp, bf16* vp, const int* tables, int W,
                                         const int* slot, const int* pos, int P, int T,
                                         int NQ, int KV, int half) {
    pdl_trigger();
    pdl_wait();
    const int H = NQ + 2 * KV, hd = 2 * half;
    const long long n = (long long)T * H * half;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const int i = idx % half;
        const long long t2 = idx / half;
        const int h = t2 % H;
        const long long m = t2 / H;
        const int p = pos[m];
        const float* xr = qkv + m * rs + (long long)h * hd;
        float a = xr[i], b = xr[i + half];
        if (h < NQ + KV) rope_pair(a, b, p, inv[i]);          // q and k: rotate (as rope_cuda)
        if (h < NQ) {
            float* o = q + (m * NQ + h) * hd;
            o[i] = a;
            o[i + half] = b;
            continue;
        }
        if (p < 0) continue;                                  // padding: no KV row
        const bool isk = h < NQ + KV;
        const int kh = isk ? h - NQ : h - NQ - KV;
        const long long page = tables[(long long)slot[m] * W + p / P];
        const long long dst = ((page * P + p % P) * KV + kh) * hd + i;
        bf16* pool = isk ? kp : vp;
        pool[dst] = f2b(a);
        pool[dst + half] = f2b(b);
    }
}
