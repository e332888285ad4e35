"""Where foldserve's time goes on the GLM-5.3-Flash-shaped file: each ops method timed at
the top level (nested calls not counted twice)."""
import sys, time, collections
import numpy as np
import kernels; kernels.init()
import numba
from pathlib import Path
from bench.moe_cpu import Foldserve
f = Path(sys.argv[1])
t0 = time.time()
eng = Foldserve(f, 2)
print(f"load {eng.load_s:.1f}s warm {time.time()-t0-eng.load_s:.1f}s", flush=True)
ops = eng.eng.model.ops
print(ops, ops.describe())
acc = collections.Counter(); depth = [0]
for name in dir(type(ops)):
    if name.startswith("_") or not callable(getattr(ops, name)) or name in ("describe",):
        continue
    inner = getattr(ops, name)
    def wrap(inner=inner, name=name):
        def timed(*a, **k):
            depth[0] += 1
            t = time.perf_counter()
            try:
                return inner(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    acc[name] += time.perf_counter() - t
        return timed
    setattr(ops, name, wrap())
for label, fn in (("tg32", lambda: eng.decode(1, 32)), ("pp512", lambda: eng.prefill(512))):
    acc.clear()
    t = time.perf_counter(); r = fn(); dt = time.perf_counter() - t
    print(f"{label}: {r[0]:.2f} tok/s, {dt:.2f} s; ops {sum(acc.values()):.2f} s:",
          ", ".join(f"{k} {v:.3f}" for k, v in acc.most_common(12)), flush=True)
