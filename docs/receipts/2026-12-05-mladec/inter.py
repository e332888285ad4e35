"""within one process: decode steps alternating mla_attend variants (per-call medians)."""
import sys, time, os
import server  # noqa
import numpy as np
from pathlib import Path
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
import kernels; kernels.init()
from kernels import mla_cpu
ctx = int(sys.argv[1]); steps = int(sys.argv[2])
variants = {k: eval(v) for k, v in (a.split("=", 1) for a in sys.argv[3:])}
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
inner = mla_cpu.round_attend
cur = [None]
rec = {k: [] for k in variants}
srec = {k: [] for k in variants}
def ra(*a, **k):
    t0 = time.perf_counter()
    try: return inner(*a, **variants[cur[0]], **k)
    finally: rec[cur[0]].append(time.perf_counter() - t0)
mla_cpu.round_attend = ra
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, ctx))
cur[0] = list(variants)[0]
lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
nxt = int(np.argmax(lg[0]))
for v in rec.values(): v.clear()
names = list(variants)
for k in range(steps):
    cur[0] = names[k % len(names)]
    t0 = time.perf_counter()
    lg = f.eng.apply(RoundStep((Chunk(0, ctx + k, (nxt,)),)))
    srec[cur[0]].append(time.perf_counter() - t0)
    nxt = int(np.argmax(lg[0]))
for n in names:
    print(f"ctx {ctx} {n:10s} mla per call median {np.median(rec[n])*1e3:.3f} ms p25 {np.percentile(rec[n],25)*1e3:.3f}  step median {np.median(srec[n])*1e3:.2f}", flush=True)
print("load", os.getloadavg())
