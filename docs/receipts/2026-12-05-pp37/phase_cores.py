"""bench.moe_cpu's foldserve child, phase by phase: wall seconds and this process's cores
(process_time / wall) for the load (Foldserve(): mmap, engine, warm-up), tg (32 tokens),
pp512 and b8, as foldserve_numbers runs them.
    flock /work/notes/bench.lock env PYTHONPATH=<tree> python phase_cores.py FILE [rounds]"""
import sys
import time
from pathlib import Path

import server  # noqa: F401  (OPENBLAS_NUM_THREADS=1 first, as bench.moe_cpu's child has it)
from bench.moe_cpu import Foldserve


def span(name, fn):
    c, t = time.process_time(), time.perf_counter()
    r = fn()
    w = time.perf_counter() - t
    print(f"  {name:6s} {w:7.2f} s  {(time.process_time() - c) / w:.2f} cores  {r if r else ''}", flush=True)
    return w, time.process_time() - c


path = Path(sys.argv[1])
c0, t0 = time.process_time(), time.perf_counter()
holder = {}
span("load", lambda: holder.setdefault("f", Foldserve(path, 2)) and None)
f = holder["f"]
for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
    span("tg", lambda: f"{f.decode(1, 32)[0]:.2f} tok/s")
    span("pp512", lambda: f"{f.prefill(512)[0]:.2f} tok/s")
    span("b8", lambda: f"{f.decode(8, 32)[0]:.2f} tok/s")
w = time.perf_counter() - t0
print(f"  all    {w:7.2f} s  {(time.process_time() - c0) / w:.2f} cores", open("/proc/loadavg").read().strip())
