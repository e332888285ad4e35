"""In the engine: capture the down products' args at a pp512 prefill, then time them again in
the same process: as captured (file-backed stack), stack copied to anonymous memory, x random."""
import sys, time, resource
from pathlib import Path
import server  # noqa
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
import kernels; kernels.init()
from kernels import moe_cpu, kquant_cpu as KQ
f = Foldserve(Path(sys.argv[1]), 2)
caps = []
inner = moe_cpu.grouped_matmul
def cap(x, stack, experts, offs, *a):
    t = time.perf_counter(); r0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    y = inner(x, stack, experts, offs, *a)
    dt = time.perf_counter() - t; r1 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    caps.append((x.copy(), stack, experts.copy(), offs.copy(), dt, (r1 - r0, resource.getrusage(resource.RUSAGE_SELF).ru_majflt), x.flags.c_contiguous, x.dtype))
    return y
import os
if os.environ.get('WARM'):
    f.warm(); f.prefill(512)
moe_cpu.grouped_matmul = cap
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
def tm(fn, reps=3):
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter(); c = time.process_time(); fn(); dt = time.perf_counter() - t
        if dt < best: best, bc = dt, time.process_time() - c
    return best, bc
rng = np.random.default_rng(1)
for (x, stack, ex, offs, dt0, flt, contig, dt) in caps:
    R, K = x.shape; N = stack.rows
    mac = R * N * K
    data = stack.data
    anon = np.array(data)
    xr = rng.standard_normal(x.shape).astype(np.float32) * np.float32(np.abs(x).mean())
    print(f"{stack.kind} N={N} K={K} R={R} groups={len(ex)} in-situ {dt0*1e3:.1f} ms ({mac/dt0/1e9:.1f} GMAC/s) minflt {flt} contig {contig} {dt} "
          f"x |mean| {np.abs(x).mean():.3g} min|x|>0 {np.abs(x[x!=0]).min():.3g} zeros {np.mean(x==0):.3f}", flush=True)
    for name, fn in (("again", lambda: KQ.grouped_matmul(x, stack.kind, data, ex, offs)),
                     ("anon", lambda: KQ.grouped_matmul(x, stack.kind, anon, ex, offs)),
                     ("x rand", lambda: KQ.grouped_matmul(xr, stack.kind, data, ex, offs)),
                     ("again", lambda: KQ.grouped_matmul(x, stack.kind, data, ex, offs))):
        b, c = tm(fn)
        print(f"   {name:8s} {b*1e3:7.1f} ms {mac/b/1e9:6.1f} GMAC/s ({c/b:.2f} cores)", flush=True)
    sz = np.diff(offs); print("   group sizes: min", sz.min(), "median", int(np.median(sz)), "max", sz.max(), flush=True)
print("load", open("/proc/loadavg").read().strip())
