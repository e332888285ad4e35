"""within one process: decode steps alternating the linears' thread count (1 / 2)."""
import sys, time, os
import server  # noqa
import numpy as np
import numba
from pathlib import Path
from collections import defaultdict
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
ctx = int(sys.argv[1]); steps = int(sys.argv[2])
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
inner = ops.linear
mode = [2]
rec = defaultdict(list)
def lin(x, w, bias=None):
    t0 = time.perf_counter()
    one = mode[0] == 1 or (mode[0] == 3 and getattr(w, "rows", 0) != f.spec.vocab)
    if one: numba.set_num_threads(1)
    try: return inner(x, w, bias)
    finally:
        if one: numba.set_num_threads(2)
        rec[(mode[0], getattr(w, "rows", None))].append(time.perf_counter() - t0)
ops.linear = lin
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, ctx))
lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
nxt = int(np.argmax(lg[0]))
rec.clear()
srec = defaultdict(list)
for k in range(steps):
    mode[0] = 1 + k % 3
    t0 = time.perf_counter()
    lg = f.eng.apply(RoundStep((Chunk(0, ctx + k, (nxt,)),)))
    srec[mode[0]].append(time.perf_counter() - t0)
    nxt = int(np.argmax(lg[0]))
for m in (1, 2, 3):
    print(f"mode {m} (1: linears on 1 thread, 2: on 2, 3: 1 but the head): step median {np.median(srec[m])*1e3:.2f} ms")
for key in sorted(set(r for _, r in rec), key=lambda r: -(r or 0)):
    a, b = np.median(rec[(1, key)]) * 1e3, np.median(rec[(2, key)]) * 1e3
    print(f"  rows {key}: 1 thread {a:.3f} ms   2 threads {b:.3f} ms  calls/step {len(rec[(1,key)])*3//steps}")
print("load", os.getloadavg())
