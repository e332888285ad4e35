import time, sys, os
import numpy as np
sys.path.insert(0, os.getcwd())
from server.engine.build import open_model
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep
eng = open_model(None, progress=False).engine
m = eng.model
print(type(m), getattr(m, 'fused', None))
eng.apply(PoolStep(True, 1200, 16, (eng.page_bytes(16),), 9, 2048))
for s in range(2):
    eng.apply(BeginStep(s, tuple(range(s * 128, s * 128 + 128))))
ids = list(range(100, 1100))
for s in range(0, 1000, 500):
    eng.apply(RoundStep((Chunk(0, s, tuple(ids[s:s + 500]), False),)))
eng.apply(RoundStep((Chunk(1, 0, tuple(ids[:40]), False),)))
cases = {}
for k in (1, 3, 9):
    cases[f"ctx1000 1x{k} every"] = (Chunk(0, 1000, tuple(ids[:k]), EVERY_ROW),)
    cases[f"ctx1000 1x{k} last"] = (Chunk(0, 1000, tuple(ids[:k]), True),)
    cases[f"ctx40 1x{k} every"] = (Chunk(1, 40, tuple(ids[:k]), EVERY_ROW),)
times = {c: [] for c in cases}
for c, st in cases.items(): eng.apply(RoundStep(st))
for _ in range(5):
    for c, st in cases.items():
        t0 = time.perf_counter(); eng.apply(RoundStep(st)); times[c].append(time.perf_counter()-t0)
for c, ts in times.items():
    ts.sort(); print(f"{c:22s} med {ts[2]*1e3:7.1f} min {ts[0]*1e3:7.1f}")
print(os.getloadavg())
