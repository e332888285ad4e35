"""16 streams on dummy:tiny-glm4moe-mtp, where the MTP per-round cost goes: an engine without
the MTP layer (base), with it and --draft mtp (the pass deferred in full rounds), the same
with the scheduler's MTP step skipped altogether, and the MTP engine with drafts off; the four
alternated, 7 rounds, min and median wall ms. Run from the repository root:

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts-2/mtp_load_parts.py
"""
import os
import sys, time
ROUNDS = 7
sys.path.insert(0, os.getcwd())
sys.path.insert(0, "tests/drafts")
from server.drafts.policy import ROW_COST
from server.engine.build import open_model
from server.requests import SamplingParams as P
from server.scheduler import Scheduler
from drafts_run import serve
from test_drafts_exact import REP
reqs = [(REP[i % 8:], P(max_tokens=48, temperature=0.0) if i % 2 else P(max_tokens=48, temperature=0.9, seed=i)) for i in range(16)]
base = open_model("dummy:tiny-glm4moe-mtp", progress=False).engine
mtp = open_model("dummy:tiny-glm4moe-mtp", progress=False, mtp=True).engine
orig = Scheduler._after_round
def run(name):
    Scheduler._after_round = orig if name != "mtp no pass step" else (lambda self, c, o: None)
    eng = base if name == "base" else mtp
    d = name != "mtp engine, draft off"
    t = time.perf_counter()
    serve(eng, reqs, draft=d and name != "base", source="mtp", streams=16, chunk=64, row_cost=ROW_COST["cpu"])
    return time.perf_counter() - t
names = ["base", "mtp", "mtp no pass step", "mtp engine, draft off"]
T = {n: [] for n in names}
for n in names: run(n)
for _ in range(ROUNDS):
    for n in names: T[n].append(run(n))
for n in names:
    print(f"{n:24s} min {min(T[n])*1e3:6.1f} ms  median {sorted(T[n])[ROUNDS // 2]*1e3:6.1f}  "
          f"rounds {', '.join(f'{t*1e3:.0f}' for t in T[n])}")
print("loadavg", os.getloadavg())
