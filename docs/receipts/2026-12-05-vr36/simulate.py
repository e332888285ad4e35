"""The drafts36 replay (docs/receipts/2026-12-05-drafts36/simulate.py's `run`: recorded greedy
replies through the real Paced(NgramDrafts), each round charged a chunk cost in one-row
rounds) with the chunk costs of this branch's kernels: the pace reading main's CHUNK_COST
(OLD) or this branch's (NEW), each charged OLD (main's kernels) or NEW (vr36's kernels, 7-9
rows cheaper). The kernel alone: pace OLD charged NEW against pace OLD charged OLD.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-vr36/simulate.py
"""
import math
import sys
sys.argv = sys.argv[:1]
sys.path.insert(0, ".")
import importlib.util, io, contextlib
spec = importlib.util.spec_from_file_location("s36", "docs/receipts/2026-12-05-drafts36/simulate.py")
m = importlib.util.module_from_spec(spec)
with contextlib.redirect_stdout(io.StringIO()):
    spec.loader.exec_module(m)
OLD = (1.0, 1.19, 1.46, 1.63, 1.87, 2.19, 2.83, 2.80, 3.0)
NEW = (1.0, 1.19, 1.46, 1.63, 1.87, 2.19, 2.59, 2.55, 2.76)
names = list(m.R)
print(" " * 30 + " ".join(f"{n[:9]:>9s}" for n in names) + "  geo(edits) geo(others)")
for lab, pace, charge in (("pace OLD, kernels main", OLD, OLD), ("pace OLD, kernels vr36", OLD, NEW),
                          ("pace NEW, kernels vr36", NEW, NEW)):
    v = [m.run(*m.R[n], charge, True, pace) for n in names]
    sp = [x[0] for x in v]
    ge = math.exp(sum(math.log(x) for n, x in zip(names, sp) if n.startswith("edit")) / 5)
    go = math.exp(sum(math.log(x) for n, x in zip(names, sp) if not n.startswith("edit")) / 9)
    print(f"  {lab:28s}" + " ".join(f"{x:8.2f}x" for x in sp) + f"  {ge:.3f} {go:.3f}")
    e = v[0]
    print(f"  {'':28s}editing: {e[1]} rounds, {e[2]} drafted, {e[3]} taken")
