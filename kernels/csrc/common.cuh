
typedef unsigned short bf16;
#define FULL 0xffffffffu
__device__ __forceinline__ float b2f(bf16 x) { return __uint_as_float(((unsigned)x) << 16); }
__device__ __forceinline__ bf16 f2b(float f) {           // round to nearest even, NaN kept
    unsigned u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)0x7fc0;
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16)(u >> 16);
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o; o >>= 1) v += __shfl_xor_sync(FULL, v, o);
    return v;
}
// SwiGLU's silu(g) * u, each step rounded on its own (no contraction can differ between the
// kernels that use it: swiglu_cuda and the GEMM's fused epilogue)
__device__ __forceinline__ float silu_mul(float g, float u) {
    return __fmul_rn(__fdiv_rn(g, __fadd_rn(1.0f, expf(-g))), u);
}
// RMSNorm's arithmetic, each step rounded on its own (rmsnorm_cuda and the GEMM's fused
// prologue in matmul_cuda): a row's sum of squares is laid out over T = min(1024, D rounded
// up to 32) threads, thread t summing v[t + u T] (u = 0, 1, ..) with fma, then a butterfly in
// each warp of 32, then the warps' sums in a butterfly over one warp (zeros past them)
__device__ __forceinline__ float rms_scale(float ss, int D, float eps) {
    return __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(__fdiv_rn(ss, (float)D), eps)));
}
__device__ __forceinline__ float rms_apply(float v, float r, bf16 w) {
    return __fmul_rn(__fmul_rn(v, r), b2f(w));
}
// RoPE of one pair (a, b) = (x[i], x[i + half]) at position p: the angle f32(p) x inv in
// float32, cosf/sinf, products and sums rounded on their own (rope_cuda, kv_write_cuda)
__device__ __forceinline__ void rope_pair(float& a, float& b, int p, float inv) {
    const float f = __fmul_rn((float)p, inv);
    const float c = cosf(f), s = sinf(f);
    const float a2 = __fsub_rn(__fmul_rn(a, c), __fmul_rn(b, s));
    b = __fadd_rn(__fmul_rn(b, c), __fmul_rn(a, s));
    a = a2;
}
// Programmatic dependent launch (sm_90 and later; no-ops before): a kernel lets the next one
// be scheduled (`pdl_trigger`, at its start) and waits for the one before it to finish and
// flush (`pdl_wait`) before it reads anything that kernel may write, and before it writes
// anything at all; only the weights (never written during a forward) may be touched before.
// Launched without the attribute (see `launch`) both are no-ops.
__device__ __forceinline__ void pdl_trigger() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait() {
#if __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o; o >>= 1) v = fmaxf(v, __shfl_xor_sync(FULL, v, o));
    return v;
}
