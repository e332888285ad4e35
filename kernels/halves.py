"""Two halves of a row-wise job on two threads: the calling thread and one helper (a Python
thread; the job's work is nogil numba or numpy, which let go of the GIL).

pair(fn, cut, n): fn(0, cut) on the helper and fn(cut, n) here, both done on return (the
helper's error raised here). fn's rows are its own (what it writes for rows a..b depends on
those rows alone), so the bytes are those of fn(0, n) whatever the cut and the threads.
`wanted(rows)`: whether a job of that many rows is split (PAIR_FROM rows or more, and numba's
thread count above one: the engine's --threads)."""
from __future__ import annotations

PAIR_FROM = 64
_POOL: list = []


def threads() -> int:
    """numba's thread count where numba is loaded (the ops that split run next to numba's
    kernels), else 1; this module imports no numba itself (not one of NUMBA_MODULES)."""
    import sys
    nb = sys.modules.get("numba")
    try:
        return nb.get_num_threads() if nb is not None else 1
    except Exception:               # noqa: BLE001 (numba's threading layer unavailable: one)
        return 1


def wanted(rows: int) -> bool:
    return rows >= PAIR_FROM and threads() > 1


def pair(fn, cut: int, n: int) -> None:
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor
        _POOL.append(ThreadPoolExecutor(1, thread_name_prefix="foldserve-half"))
    f = _POOL[0].submit(fn, 0, cut)
    try:
        fn(cut, n)
    finally:
        f.result()
