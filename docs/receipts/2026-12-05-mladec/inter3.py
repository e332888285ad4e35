"""within one process: decode steps alternating kquant_cpu.SOLO_PER_GROUP (the MoE's grouped rows solo)."""
import sys, time, os
import server  # noqa
import numpy as np
from pathlib import Path
from collections import defaultdict
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
import kernels; kernels.init()
from kernels import kquant_cpu
ctx = int(sys.argv[1]); steps = int(sys.argv[2])
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
inner = ops.moe
rec = defaultdict(list)
mode = [0]
def moe(*a, **k):
    t0 = time.perf_counter()
    try: return inner(*a, **k)
    finally: rec[mode[0]].append(time.perf_counter() - t0)
ops.moe = moe
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, ctx))
lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
nxt = int(np.argmax(lg[0]))
rec.clear()
srec = defaultdict(list)
for k in range(steps):
    mode[0] = k % 2
    kquant_cpu.SOLO_PER_GROUP = bool(mode[0])
    t0 = time.perf_counter()
    lg = f.eng.apply(RoundStep((Chunk(0, ctx + k, (nxt,)),)))
    srec[mode[0]].append(time.perf_counter() - t0)
    nxt = int(np.argmax(lg[0]))
for m in (0, 1):
    print(f"SOLO_PER_GROUP {bool(m)}: step median {np.median(srec[m])*1e3:.2f} ms  moe per call median {np.median(rec[m])*1e3:.3f} ms")
print("load", os.getloadavg())
