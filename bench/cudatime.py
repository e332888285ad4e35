"""Shared by the GPU benchmark scripts: device-event timing and a results log."""
from __future__ import annotations

import cupy as cp
import numpy as np


class Results(dict):
    def log(self, k, v):
        self[k] = v
        print(f"{k}: {v}", flush=True)


def cuda_ms(fn, reps=10, warm=2):
    """Median milliseconds of fn() over reps, timed with device events after warm calls."""
    for _ in range(warm):
        fn()
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return float(np.median(ts))


def copy_TBps(n_floats: int = 1 << 28) -> float:
    """The device's copy rate (bytes read + written a second, in TB/s) on a 1 GiB buffer."""
    src = cp.random.random(n_floats, dtype=cp.float32)
    dst = cp.empty_like(src)
    return 2 * src.nbytes / cuda_ms(lambda: dst.__setitem__(Ellipsis, src)) / 1e9
