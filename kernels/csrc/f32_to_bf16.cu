
extern "C" __global__ void f32_to_bf16(const float* x, bf16* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = f2b(x[i]);
}
