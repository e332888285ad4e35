
extern "C" __global__ void rmsnorm(const float* x, const float* res, float* hout,
                                   const bf16* w, bf16* out, int D, float eps) {
    __shared__ float red[32];
    pdl_trigger();
    pdl_wait();
    const long long base = (long long)blockIdx.x * D;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    float v[NPT], ss = 0.f;                  // the row stays in registers: NPT values a thread
#pragma unroll
    for (int u = 0; u < NPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
        v[u] = 0.f;
        if (i < D) {
            v[u] = x[base + i];
            if (res) { v[u] = __fadd_rn(v[u], res[base + i]); hout[base + i] = v[u]; }
            ss = __fmaf_rn(v[u], v[u], ss);
        }
    }
    ss = warp_sum(ss);
    if (lane == 0) red[warp] = ss;
    __syncthreads();
    if (warp == 0) {
        float t = lane < nw ? red[lane] : 0.f;
        t = warp_sum(t);
        if (lane == 0) red[0] = t;
    }
    __syncthreads();
    const float r = rms_scale(red[0], D, eps);   // common_cuda: shared with the GEMM prologue
#pragma unroll
    for (int u = 0; u < NPT; u++) {
        const int i = threadIdx.x + u * blockDim.x;
#if PI_
        // pi order within each 32-element chunk (matmul_cuda.Packed): for a TMA GEMM's x
        if (i < D) out[base + (i & ~31) + 8 * ((i >> 1) & 3) + 2 * ((i >> 3) & 3) + (i & 1)] =
            f2b(rms_apply(v[u], r, w[i]));
#else
        if (i < D) out[base + i] = f2b(rms_apply(v[u], r, w[i]));
#endif
    }
}
