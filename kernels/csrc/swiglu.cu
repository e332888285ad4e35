
// grid (ceil(F / 1024), min(M, 65535)), 256 threads: a block covers 1,024 columns of a row
// (rows strided by the grid's y), each thread 4 of them, 256 apart (no 64-bit division)
extern "C" __global__ void swiglu(const float* g, const float* u, long long rs, bf16* out,
                                  int M, int F) {
    for (long long m = blockIdx.y; m < M; m += gridDim.y) {
        const float* gr = g + m * rs;
        const float* ur = u + m * rs;
        bf16* o = out + m * F;
#pragma unroll
        for (int e = 0; e < 4; e++) {
            const int f = blockIdx.x * 1024 + e * 256 + threadIdx.x;
            if (f < F) o[f] = f2b(silu_mul(gr[f], ur[f]));
        }
    }
}
