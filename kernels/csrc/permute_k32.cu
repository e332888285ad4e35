
// x [M, K] bf16 -> each 32-k chunk in pi order: a quad of lanes a chunk, each lane 16 bytes
// (so a warp reads and writes 512 contiguous bytes), regrouped by `unpi`. n: 16-byte words, a
// multiple of 4; lanes past n take part in the shuffles and store nothing.
extern "C" __global__ void permute_k32(const uint4* __restrict__ in, uint4* __restrict__ out, long long n) {
    const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const uint4 u = unpi(i < n ? in[i] : make_uint4(0u, 0u, 0u, 0u));
    if (i < n) out[i] = u;
}
