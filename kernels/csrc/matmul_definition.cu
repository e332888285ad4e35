
// The arithmetic itself, as plainly as it goes: one warp a 16 x 8 tile, W row-major [N, K] in
// natural order, every range read from global memory (zeros past M, N and K). Tests hold every
// kernel's bytes against it.
__device__ __forceinline__ uint4 row8(const bf16* a, int r, int R, int k, int K) {
    return r < R && k < K ? *(const uint4*)(a + (long long)r * K + k) : make_uint4(0, 0, 0, 0);
}
extern "C" __global__ void definition(const bf16* x, const bf16* W, const bf16* bias, float* C,
                                      int M, int N, int K) {
    const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
    const int n0 = blockIdx.x * 8, m0 = blockIdx.y * 16, nch = (K + 31) / 32;
    float tot[4] = {0.f, 0.f, 0.f, 0.f};
    for (int q = 0; q < S_; q++) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
        for (int c = (int)((long long)q * nch / S_); c < (int)((long long)(q + 1) * nch / S_); c++) {
            const int k = 32 * c + 8 * t;
            const uint4 xl = row8(x, m0 + g, M, k, K), xh = row8(x, m0 + g + 8, M, k, K);
            const uint4 w = row8(W, n0 + g, N, k, K);
            mma(acc, xl.x, xh.x, xl.y, xh.y, w.x, w.y);            // k 8t .. 8t+3 of each quad
            mma(acc, xl.z, xh.z, xl.w, xh.w, w.z, w.w);            // k 8t+4 .. 8t+7
        }
        for (int r = 0; r < 4; r++) tot[r] = __fadd_rn(tot[r], acc[r]);
    }
    for (int r = 0; r < 4; r++) {
        const int m = m0 + g + 8 * (r >> 1), n = n0 + 2 * t + (r & 1);
        if (m < M && n < N) C[(long long)m * N + n] = bias ? tot[r] + b2f(bias[n]) : tot[r];
    }
}
