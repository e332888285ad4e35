
template <int n> __device__ __forceinline__ void wg_wait() {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(n) : "memory");
}
__device__ __forceinline__ void wg_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// neither read the accumulators before a wgmma.wait_group nor write them after a fence
__device__ __forceinline__ void fence_acc(float* acc) {
#pragma unroll
    for (int i = 0; i < NACC; i++) asm volatile("" : "+f"(acc[i]) :: "memory");
}
