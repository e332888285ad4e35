"""within one process: decode steps alternating kquant_cpu.SOLO_ROWS 0 / 1 and mla crew on/off."""
import sys, time, os
import server  # noqa
import numpy as np
from pathlib import Path
from collections import defaultdict
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
import kernels; kernels.init()
from kernels import kquant_cpu, mla_cpu
ctx = int(sys.argv[1]); steps = int(sys.argv[2])
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
rec = defaultdict(list)
mode = [0]
inner_l = ops.linear
def lin(x, w, bias=None):
    t0 = time.perf_counter()
    try: return inner_l(x, w, bias)
    finally: rec[(mode[0], "rows %s" % getattr(w, "rows", None))].append(time.perf_counter() - t0)
ops.linear = lin
inner_a = mla_cpu.round_attend
def ra(*a, **k):
    t0 = time.perf_counter()
    try: return inner_a(*a, crew=mode[0] in (1, 3), **k)
    finally: rec[(mode[0], "mla")].append(time.perf_counter() - t0)
mla_cpu.round_attend = ra
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, ctx))
lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
nxt = int(np.argmax(lg[0]))
rec.clear()
srec = defaultdict(list)
names = {0: "base (crew linears, prange mla)", 1: "mla crew", 2: "solo linears", 3: "both"}
for k in range(steps):
    mode[0] = k % 4
    kquant_cpu.SOLO_ROWS = 1 if mode[0] >= 2 else 0
    t0 = time.perf_counter()
    lg = f.eng.apply(RoundStep((Chunk(0, ctx + k, (nxt,)),)))
    srec[mode[0]].append(time.perf_counter() - t0)
    nxt = int(np.argmax(lg[0]))
for m in range(4):
    print(f"{names[m]:34s}: step median {np.median(srec[m])*1e3:.2f} ms  mla {np.median(rec[(m,'mla')])*1e3:.3f}  "
          + " ".join(f"{k[1]}:{np.median(v)*1e3:.3f}" for k, v in sorted(rec.items()) if k[0] == m and k[1] != 'mla'))
print("load", os.getloadavg(), flush=True)
