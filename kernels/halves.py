"""Two halves of a row-wise job on two threads: the calling thread and one helper (a Python
thread; the job's work is nogil numba or numpy, which let go of the GIL).

pair(fn, cut, n): fn(0, cut) on the helper and fn(cut, n) here, both done on return (the
helper's error raised here). fn's rows are its own (what it writes for rows a..b depends on
those rows alone), so the bytes are those of fn(0, n) whatever the cut and the threads.
`wanted(rows)`: whether a job of that many rows is split (PAIR_FROM rows or more, and numba's
thread count above one: the engine's --threads).

Not a kernels/team_cpu.Crew, on purpose. A Crew runs one nogil numba member on every thread,
pieces taken from atomic counters, each member spinning then yielding its core until every
piece is done: right for a round of many stages with no Python between them. A pair's job is
a Python callable (numpy calls with the GIL taken between them, or one numba call), cut once;
the caller blocks on the helper's future, its core free meanwhile for the helper or the HTTP
thread. And this module imports no numba (ops_cpu's numpy backend imports it), where team_cpu
is a numba module. `pair` on a Crew (two pieces, the caller taking the helper's if it has not
started) was measured: faster at 64 rows (rms_norm 136 -> 110 us), no faster at 512 and in one
round of six 1.5-1.8x slower (rms_norm 497 -> 855 us), the caller spinning beside a helper
late to a core (receipt 2026-12-06-tidy39)."""
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
