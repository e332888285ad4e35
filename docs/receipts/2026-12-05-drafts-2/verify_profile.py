"""What a verify chunk costs (the default model's forward alone, ~1,000 keys): one stream's
chunk of 1 / 3 / 5 / 9 rows with every row's logits (the last token and 0 / 2 / 4 / 8
drafts), the same with only the last row's logits (the head's share), 9 streams' one decode
row each, and one stream's 9 rows at 40 keys (attention's share); cases alternated rep by
rep, medians and minimums in ms, the row cost (t(1x9) / t(1x1) - 1) / 8.

  PYTHONPATH=TREE python verify_profile.py [--reps 7] [--label NAME]
"""
import os
import sys
import time

sys.path.insert(0, os.getcwd())
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

reps = int(sys.argv[sys.argv.index("--reps") + 1]) if "--reps" in sys.argv else 7
label = sys.argv[sys.argv.index("--label") + 1] if "--label" in sys.argv else os.getcwd()
eng = open_model(None, progress=False).engine
eng.apply(PoolStep(True, 1300, 16, (eng.page_bytes(16),), 10, 2048))
for s in range(10):
    eng.apply(BeginStep(s, tuple(range(s * 128, s * 128 + 128))))
ids = list(range(100, 1100))
for st in range(9):                                   # 1,000 rows of context, streams 0..8
    for s in range(0, 1000, 500):
        eng.apply(RoundStep((Chunk(st, s, tuple(ids[s:s + 500]), False),)))
eng.apply(RoundStep((Chunk(9, 0, tuple(ids[:40]), False),)))
cases = {}
for k in (1, 3, 5, 9):
    cases[f"1x{k} every row"] = (Chunk(0, 1000, tuple(ids[:k]), EVERY_ROW),)
cases["1x9 last row only"] = (Chunk(0, 1000, tuple(ids[:9]), True),)
cases["9x1 (9 streams)"] = tuple(Chunk(s, 1000, (ids[s],), True) for s in range(9))
cases["1x1 at 40 keys"] = (Chunk(9, 40, tuple(ids[:1]), EVERY_ROW),)
cases["1x9 at 40 keys"] = (Chunk(9, 40, tuple(ids[:9]), EVERY_ROW),)
times = {c: [] for c in cases}
for c, st in cases.items():
    eng.apply(RoundStep(st))
for _ in range(reps):
    for c, st in cases.items():
        t0 = time.perf_counter()
        eng.apply(RoundStep(st))
        times[c].append(time.perf_counter() - t0)
med = {}
for c, ts in times.items():
    ts.sort()
    med[c] = ts[len(ts) // 2] * 1e3
    print(f"{label}: {c:20s} median {med[c]:7.1f} ms  min {ts[0] * 1e3:7.1f} ms", flush=True)
print(f"{label}: row cost (1x9 / 1x1 - 1) / 8 = {(med['1x9 every row'] / med['1x1 every row'] - 1) / 8:.3f}; "
      f"at 40 keys {(med['1x9 at 40 keys'] / med['1x1 at 40 keys'] - 1) / 8:.3f}; loadavg {os.getloadavg()}")
