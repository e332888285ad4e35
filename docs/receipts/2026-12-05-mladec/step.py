"""decode steps at batch 1 after a prompt of --ctx tokens: median step ms (fresh process)."""
import sys, time, os
import server  # noqa
import numpy as np
from pathlib import Path
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
ctx = int(sys.argv[1]) if len(sys.argv) > 1 else 1
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 64
f = Foldserve(Path("/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
acc = {}
def wrap(name):
    inner = getattr(ops, name)
    acc[name] = []
    def timed(*a, **k):
        t0 = time.perf_counter()
        try: return inner(*a, **k)
        finally: acc[name].append(time.perf_counter() - t0)
    setattr(ops, name, timed)
wrap("mla_attend")
f._begin(0)
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, ctx))
lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
nxt = int(np.argmax(lg[0]))
for v in acc.values(): v.clear()
ts = []
for k in range(steps):
    t0 = time.perf_counter()
    lg = f.eng.apply(RoundStep((Chunk(0, ctx + k, (nxt,)),)))
    ts.append(time.perf_counter() - t0)
    nxt = int(np.argmax(lg[0]))
print(f"{os.environ.get('TAG','?')} ctx {ctx} step median {np.median(ts)*1e3:.2f} ms  p25 {np.percentile(ts,25)*1e3:.2f}  "
      + "  ".join(f"{k} {np.median(v)*1e3:.3f}" for k, v in acc.items()) + f"  load {os.getloadavg()[0]:.2f}", flush=True)
