
// "Pi order" (matmul_cuda.Packed): a 32-k chunk's stored 32-bit word 4i + t is natural word
// 4t + i (k pair 8t + 2i, +1). Lane t of a quad holding words 4t .. 4t+3 of a chunk in one
// order gets words 4t .. 4t+3 of it in the other (a 4x4 word transpose across the quad, its own
// inverse) from two butterfly exchanges. Every lane of the warp must call it (shuffles).
__device__ __forceinline__ uint4 unpi(uint4 u) {
    const int t = threadIdx.x & 3;
    unsigned s0 = (t & 2) ? u.x : u.z, s1 = (t & 2) ? u.y : u.w;
    unsigned r0 = __shfl_xor_sync(FULL, s0, 2), r1 = __shfl_xor_sync(FULL, s1, 2);
    if (t & 2) { u.x = r0; u.y = r1; } else { u.z = r0; u.w = r1; }
    s0 = (t & 1) ? u.x : u.y; s1 = (t & 1) ? u.z : u.w;
    r0 = __shfl_xor_sync(FULL, s0, 1); r1 = __shfl_xor_sync(FULL, s1, 1);
    if (t & 1) { u.x = r0; u.z = r1; } else { u.y = r0; u.w = r1; }
    return u;
}
