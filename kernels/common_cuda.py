"""Shared pieces of the CUDA forms: bf16 <-> f32 in device code, run-time compilation for
the device's own SM (cupy/NVRTC picks the arch of the current device; none is named here).

bf16 is stored as raw 16-bit words (`bf16` below); arithmetic is always float32.
"""
from __future__ import annotations

import ctypes
import os

import cupy as cp
import numpy as np

BF16 = getattr(cp, "bfloat16", None)
if BF16 is None:                                   # cupy < 14: the ml_dtypes type
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16

HEADER = r"""
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
"""

UNPI = r"""
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
"""

_cache: dict = {}


def kernel(src: str, name: str, defines: tuple = (), smem: int = 0):
    """The compiled kernel `name` of src (cached). smem: dynamic shared memory bytes the
    kernel may ask for beyond the default 48 KiB (its launches pass shared_mem=...)."""
    key = (src, name, defines, smem)
    if key not in _cache:
        opts = ("--std=c++14",) + tuple(f"-D{d}" for d in defines)
        if smem:
            fn = cp.RawKernel(HEADER + src, name, options=opts)
            fn.max_dynamic_shared_size_bytes = smem
        else:
            fn = cp.RawModule(code=HEADER + src, options=opts).get_function(name)
        _cache[key] = fn
    return _cache[key]


PDL = os.environ.get("TF_PDL", "1") != "0"   # programmatic dependent launch in CUDA graphs
_PDL_DEV: dict = {}


class _Attr(ctypes.Structure):                  # CUlaunchAttribute
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_char * 4), ("val", ctypes.c_char * 64)]


class _Config(ctypes.Structure):                # CUlaunchConfig
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("smem", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(_Attr)), ("n", ctypes.c_uint)]


_ATTR = _Attr(6, b"", (1).to_bytes(4, "little"))   # PROGRAMMATIC_STREAM_SERIALIZATION = 1
_CTYPE = {np.dtype(np.int32): ctypes.c_int32, np.dtype(np.int64): ctypes.c_int64,
          np.dtype(np.uint64): ctypes.c_uint64, np.dtype(np.float32): ctypes.c_float}
_driver = None


def _pdl_ok() -> bool:
    dev = cp.cuda.Device().id
    if dev not in _PDL_DEV:
        _PDL_DEV[dev] = int(cp.cuda.Device().compute_capability) >= 90   # "90", "100", "121"
    return _PDL_DEV[dev]


def launch(fn, grid_: tuple, block: tuple, args: tuple, shared_mem: int = 0) -> None:
    """fn(grid, block, args) for a kernel that calls pdl_trigger / pdl_wait (HEADER). While a
    CUDA graph is being captured on an sm_90+ device, the launch carries the programmatic
    stream serialization attribute (cuLaunchKernelEx), so in the graph this kernel is
    scheduled while the one before it finishes, up to its pdl_wait. Every other launch
    (eager, older devices, TF_PDL=0) is cupy's plain one. args: cupy arrays and numpy
    scalars (int32, int64, uint64, float32), as the kernel's parameters are declared."""
    stream = cp.cuda.get_current_stream()
    if not (PDL and stream.is_capturing() and _pdl_ok()):
        fn(grid_, block, args, shared_mem=shared_mem)
        return
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
        _driver.cuLaunchKernelEx.argtypes = [ctypes.POINTER(_Config), ctypes.c_void_p,
                                             ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p]
    vals = [ctypes.c_void_p(a.data.ptr) if isinstance(a, cp.ndarray) else ctypes.c_void_p(0)
            if a is None else _CTYPE[a.dtype](a) for a in args]
    params = (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals])
    g = tuple(grid_) + (1,) * (3 - len(grid_))
    b = tuple(block) + (1,) * (3 - len(block))
    cfg = _Config((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*b), shared_mem, stream.ptr,
                  ctypes.pointer(_ATTR), 1)
    f = getattr(fn, "kernel", fn)                # RawKernel -> its Function
    rc = _driver.cuLaunchKernelEx(ctypes.byref(cfg), ctypes.c_void_p(f.ptr), params, None)
    if rc != 0:
        raise RuntimeError(f"cuLaunchKernelEx failed: CUresult {rc}")


def grid(n: int, threads: int = 256) -> tuple:
    return (min((n + threads - 1) // threads, 65535),)


_CONVERT = r"""
extern "C" __global__ void f32_to_bf16(const float* x, bf16* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = f2b(x[i]);
}
"""


def as_bf16(x):
    """x as a contiguous bf16 array (converted by round-to-nearest-even when float32)."""
    if x.dtype == BF16:
        return cp.ascontiguousarray(x)
    x = cp.ascontiguousarray(x, dtype=cp.float32)
    y = cp.empty(x.shape, dtype=BF16)
    kernel(_CONVERT, "f32_to_bf16")(grid(x.size), (256,), (x, y, cp.int64(x.size)))
    return y


_WIDEN = r"""
extern "C" __global__ void bf16_to_f32(const bf16* x, float* y, long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) y[i] = b2f(x[i]);
}
"""


def as_f32(x):
    """x as a contiguous float32 array (bf16 widened exactly)."""
    if x.dtype != BF16:
        return cp.ascontiguousarray(x, dtype=cp.float32)
    x = cp.ascontiguousarray(x)
    y = cp.empty(x.shape, dtype=cp.float32)
    if x.size:
        kernel(_WIDEN, "bf16_to_f32")(grid(x.size), (256,), (x, y, cp.int64(x.size)))
    return y


def rows_of(table, ids):
    """table[ids] for a bf16 table, gathered as 16-bit words, widened to float32."""
    if table.dtype != BF16:
        return table[ids]
    return as_f32(table.view(cp.uint16)[ids].view(BF16))
