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


def graph_ms(fn, reps: int = 10, inner: int = 4) -> float:
    """Median device milliseconds of one fn() with no host in the way: `inner` calls captured
    in one CUDA graph (scratch from the graph's own pool, kept with it), replayed `reps` times
    after a warm call (which also compiles)."""
    pool = cp.cuda.MemoryPool()
    stream = cp.cuda.Stream(non_blocking=True)
    with cp.cuda.using_allocator(pool.malloc), stream:
        fn()
        stream.synchronize()
        stream.begin_capture()
        for _ in range(inner):
            fn()
        graph = stream.end_capture()
        graph.launch(stream)
        s, e = cp.cuda.Event(), cp.cuda.Event()
        ts = []
        for _ in range(reps):
            s.record(stream)
            graph.launch(stream)
            e.record(stream)
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e) / inner)
    del graph
    return float(np.median(ts))
