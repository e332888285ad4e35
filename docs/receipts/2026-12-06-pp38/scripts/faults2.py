import server, sys, time, resource, ctypes, os
if os.environ.get("MALLOPT") == "1":
    libc = ctypes.CDLL("libc.so.6")
    print("mallopt", libc.mallopt(-3, 1 << 30), libc.mallopt(-1, 1 << 31 - 1 if False else 2**31 - 1))  # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path(sys.argv[1]), 2)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
for rep in range(3):
    r0 = resource.getrusage(resource.RUSAGE_SELF); t = time.perf_counter()
    f._begin(0); f.eng.apply(RoundStep((Chunk(0, 0, toks),))); f._end(1)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    print(f"prefill {dt*1e3:.1f} ms, minflt {r1.ru_minflt - r0.ru_minflt}, sys {r1.ru_stime - r0.ru_stime:.3f} s, user {r1.ru_utime - r0.ru_utime:.3f} s", flush=True)
print(open("/proc/self/status").read().split("VmHWM")[1][:30].strip())
