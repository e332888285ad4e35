
// (a, ia) before (b, ib): NaN first, then larger, then the lower index
__device__ __forceinline__ bool before(float a, int ia, float b, int ib) {
    const bool na = a != a, nb = b != b;
    if (na || nb) return na && (!nb || ia < ib);
    return a > b || (a == b && ia < ib);
}
extern "C" __global__ void __launch_bounds__(1024) argmax_rows(const XT* x, long long rs, int V,
                                                               int* out) {
    __shared__ float bv[32];
    __shared__ int bi[32];
    pdl_trigger();
    pdl_wait();
    const XT* row = x + blockIdx.x * rs;
    float v = 0.f;
    int i = -1;
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float a = LOAD(row[j]);
        if (i < 0 || before(a, j, v, i)) { v = a; i = j; }
    }
    for (int o = 16; o; o >>= 1) {
        const float v2 = __shfl_xor_sync(FULL, v, o);
        const int i2 = __shfl_xor_sync(FULL, i, o);
        if (i2 >= 0 && (i < 0 || before(v2, i2, v, i))) { v = v2; i = i2; }
    }
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    if (lane == 0) { bv[w] = v; bi[w] = i; }
    __syncthreads();
    if (w == 0) {
        const int nw = blockDim.x >> 5;
        v = lane < nw ? bv[lane] : 0.f;
        i = lane < nw ? bi[lane] : -1;
        for (int o = 16; o; o >>= 1) {
            const float v2 = __shfl_xor_sync(FULL, v, o);
            const int i2 = __shfl_xor_sync(FULL, i, o);
            if (i2 >= 0 && (i < 0 || before(v2, i2, v, i))) { v = v2; i = i2; }
        }
        if (lane == 0) out[blockIdx.x] = i;
    }
}
