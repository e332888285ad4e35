"""GPU tests: marked `gpu`, skipped (with the reason) where cupy or a CUDA device is absent."""
from __future__ import annotations

import numpy as np
import pytest


def _why_not() -> str | None:
    try:
        import cupy
    except Exception as e:                                  # no cupy on this machine
        return f"cupy not importable ({type(e).__name__})"
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device"
    except Exception as e:
        return f"no CUDA device ({type(e).__name__})"
    return None


WHY_NOT = _why_not()


def pytest_collection_modifyitems(config, items):
    here = __file__.rsplit("/", 1)[0]
    for item in items:
        if str(item.fspath).startswith(here):
            item.add_marker(pytest.mark.gpu)
            if WHY_NOT:
                item.add_marker(pytest.mark.skip(reason=WHY_NOT))


def bf16_round(a: np.ndarray) -> np.ndarray:
    """float32 -> nearest bf16 value (ties to even), kept as float32."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
    return u.astype(np.uint32).view(np.float32)


def poison_pool():
    """Fill free device-pool memory with a pattern that is NaN as float32 and as bf16, so
    outputs allocated next start poisoned (an unwritten element shows up as NaN)."""
    import cupy as cp
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    junk = cp.full(64 << 20, 0x7FC07FC0, dtype=cp.uint32)   # 256 MiB of NaN words
    del junk


def rel(a, ref) -> float:
    a = np.asarray(a, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert np.isfinite(a).all(), "unwritten (NaN) or non-finite output"
    return float(np.linalg.norm(a - ref) / np.linalg.norm(ref))
