
extern "C" __global__ void bf16_to_f32(const bf16* x, float* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = b2f(x[i]);
}
