"""Shared pieces of the CUDA forms: the one way a launcher composes its source (`csrc`) and
the one way it compiles it (`kernel`, the arch chosen there), PDL launches, bf16 <-> f32.

bf16 is stored as raw 16-bit words (`bf16` below); arithmetic is always float32.
"""
from __future__ import annotations

import ctypes
import logging
import re
from pathlib import Path

import cupy as cp
import numpy as np

from kernels.settings import setting

log = logging.getLogger(__name__)

BF16 = getattr(cp, "bfloat16", None)
if BF16 is None:                                   # cupy < 14: the ml_dtypes type
    import ml_dtypes
    BF16 = ml_dtypes.bfloat16

CSRC = Path(__file__).resolve().with_name("csrc")

_INCLUDE = re.compile(r'^#include "([^"]+)"\s*$', flags=re.M)


def csrc(*names: str) -> str:
    """The CUDA source composed from kernels/csrc: the named files in order, each with its
    local `#include "x.cuh"` lines replaced by kernels/csrc/x.cuh (its `#pragma once` dropped).
    Every launcher composes through this; the strings handed to the compiler are held to their
    bytes by tests/house/test_cuda_sources.py."""
    return "".join(_INCLUDE.sub(_included, (CSRC / n).read_text(encoding="utf-8")) for n in names)


def _included(m) -> str:
    return (CSRC / m.group(1)).read_text(encoding="utf-8").replace("#pragma once", "")


# Prepended by `kernel` to every source it compiles: bf16, warp reductions, the shared
# per-element arithmetic (SwiGLU, RMSNorm, RoPE), programmatic dependent launch
HEADER = csrc("common.cuh")

_cache: dict = {}
_modules: list = []                  # sm_90a modules, kept alive with their functions


def kernel(src: str, name: str, defines: tuple = (), smem: int = 0, arch: str | None = None,
           fallback: str = ""):
    """The kernel `name` of HEADER + src, compiled at run time (cached): the one compile path
    of every launcher. defines: -D options; smem: dynamic shared memory bytes the kernel may
    ask for beyond the default 48 KiB (its launches pass shared_mem=...).
    arch None: for the current device's own SM, through cupy (NVRTC, --std=c++14).
    arch "sm_90a" (wgmma, setmaxnreg and TMA are sm_90a instructions): through NVRTC for
    compute_90a (--std=c++17), loaded as PTX, per device; None (logged once, `fallback` names
    what runs instead) where the device is not sm_90 or the compile fails."""
    if arch is None:
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
    if arch != "sm_90a":
        raise ValueError(f"kernel {name}: no compile path for arch {arch!r}")
    key = (src, name, defines, smem, arch, cp.cuda.Device().id)
    if key not in _cache:
        _cache[key] = _load_sm90a(HEADER + src, name, defines, smem, fallback)
    return _cache[key]


def _load_sm90a(src: str, name: str, defines: tuple, smem: int, fallback: str):
    if cp.cuda.Device().compute_capability != "90":
        return None
    try:
        from cupy_backends.cuda.libs import nvrtc
        prog = nvrtc.createProgram(src, name + ".cu", (), ())
        try:
            nvrtc.compileProgram(prog, ("-arch=compute_90a", "--std=c++17") + tuple(f"-D{d}" for d in defines))
        except Exception:
            raise RuntimeError(nvrtc.getProgramLog(prog))
        ptx = nvrtc.getPTX(prog)
        nvrtc.destroyProgram(prog)
        if isinstance(ptx, str):
            ptx = ptx.encode()
        mod = cp.cuda.function.Module()
        mod.load(ptx.rstrip(b"\0") + b"\0")
        fn = mod.get_function(name)
        try:
            fn.max_dynamic_shared_size_bytes = smem
        except AttributeError:                                   # older cupy: the driver call
            from cupy_backends.cuda.api import driver
            driver.funcSetAttribute(fn.ptr, 8, smem)             # MAX_DYNAMIC_SHARED_SIZE_BYTES
        _modules.append(mod)                                     # kept alive with the function
        return fn
    except Exception as e:
        log.warning("%s unavailable (%s: %s); %s", name, type(e).__name__, str(e)[:300], fallback)
        return None


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
