"""Shared pieces of the CUDA forms: bf16 <-> f32 in device code, run-time compilation for
the device's own SM (cupy/NVRTC picks the arch of the current device; none is named here).

bf16 is stored as raw 16-bit words (`bf16` below); arithmetic is always float32.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import cupy as cp
import numpy as np

from server.config import setting

BF16 = getattr(cp, "bfloat16", None)
if BF16 is None:                                   # cupy < 14: the ml_dtypes type
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16

CSRC = Path(__file__).resolve().with_name("csrc")


def csrc(name: str) -> str:
    """The text of kernels/csrc/<name>, exactly as it is (the sources handed to the compiler
    are held to their bytes by tests/house/test_cuda_sources.py)."""
    return (CSRC / name).read_text(encoding="utf-8")


# Prepended to every source common_cuda.kernel compiles: bf16, warp reductions, the shared
# per-element arithmetic (SwiGLU, RMSNorm, RoPE), programmatic dependent launch
HEADER = csrc("common.cuh")

# the pi order of a 32-k chunk (matmul_packed_cuda.Packed) and its inverse
UNPI = csrc("pi_order.cuh")

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


PDL = setting("TF_PDL") != "0"   # programmatic dependent launch in CUDA graphs
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


_CONVERT = csrc("f32_to_bf16.cu")


def as_bf16(x):
    """x as a contiguous bf16 array (converted by round-to-nearest-even when float32)."""
    if x.dtype == BF16:
        return cp.ascontiguousarray(x)
    x = cp.ascontiguousarray(x, dtype=cp.float32)
    y = cp.empty(x.shape, dtype=BF16)
    kernel(_CONVERT, "f32_to_bf16")(grid(x.size), (256,), (x, y, cp.int64(x.size)))
    return y


_WIDEN = csrc("bf16_to_f32.cu")


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
