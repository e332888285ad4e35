
extern "C" __global__ void rope(const float* x, long long rs, const int* pos, const float* inv,
                                float* out, int M, int H, int half) {
    const long long n = (long long)M * H * half;
    for (long long idx = blockIdx.x * (long long)blockDim.x + threadIdx.x; idx < n;
         idx += (long long)gridDim.x * blockDim.x) {
        const int i = idx % half;
        const long long t = idx / half;
        const int h = t % H;
        const long long m = t / H;
        const float* xr = x + m * rs + (long long)h * 2 * half;
        float a = xr[i], b = xr[i + half];
        rope_pair(a, b, pos[m], inv[i]);
        float* o = out + (m * H + h) * 2 * half;
        o[i] = a;
        o[i + half] = b;
    }
}
