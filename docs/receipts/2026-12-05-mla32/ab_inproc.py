"""Before / after in one process, alternating step by step (the host's load and bandwidth
swings hit both sides alike): a batch-1 decode step of the GLM-4.7-Flash-shaped file with
(new) q_a | kv_a joined and this tree's kernels/mla_cpu.round_attend, or (old) q_a and kv_a
as two products and BASE's kernels/mla_cpu.round_attend (imported from BASE/kernels/mla_cpu.py
under another name). Logits of both sides compared byte for byte every step.

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-mla32/ab_inproc.py BASE [--steps 200] [--depth 0]
"""
import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

import server  # noqa: F401,I001
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("--steps", type=int, default=200)
ap.add_argument("--depth", type=int, default=0)
ap.add_argument("--file", default="/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf")
a = ap.parse_args()
import kernels
kernels.init()
from kernels import mla_cpu
spec = importlib.util.spec_from_file_location("base_mla_cpu", os.path.join(a.base, "kernels/mla_cpu.py"))
base_mla = importlib.util.module_from_spec(spec)
sys.modules["base_mla_cpu"] = base_mla          # numba's cache names the module
spec.loader.exec_module(base_mla)
from bench.mla_cpu import Deep
from server.ranks.steps import Chunk, RoundStep

e = Deep(Path(a.file), 2, max(a.depth + a.steps + 8, 64))
layers = e.eng.model.w.layers
joined = [L.wqkv_a for L in layers]
new_ra, old_ra = mla_cpu.round_attend, base_mla.round_attend


def side(new):
    for L, j in zip(layers, joined):
        L.wqkv_a = j if new else None
    mla_cpu.round_attend = new_ra if new else old_ra


def run(stream, start, tok):
    t = time.perf_counter()
    lg = e.eng.apply(RoundStep((Chunk(stream, start, (tok,)),)))
    return time.perf_counter() - t, lg


toks = [int(t) for t in np.random.default_rng(a.depth).integers(0, e.spec.vocab, max(a.depth, 1))]
nxt = {}
for s in (0, 1):
    side(s == 0)
    pages = e.ctx // 16
    from server.ranks.steps import BeginStep
    e.eng.apply(BeginStep(s, tuple(range(s * pages, (s + 1) * pages))))
    for c in range(0, len(toks), 512):
        lg = e.eng.apply(RoundStep((Chunk(s, c, tuple(toks[c:c + 512]), True),)))
    nxt[s] = int(np.argmax(lg[0]))
assert nxt[0] == nxt[1]
ts = {True: [], False: []}
pos = len(toks)
same = True
for k in range(a.steps):
    order = (True, False) if k % 2 == 0 else (False, True)
    lgs = {}
    for new in order:
        side(new)
        dt, lg = run(0 if new else 1, pos + k, nxt[0 if new else 1])
        ts[new].append(dt)
        lgs[new] = lg
    same &= lgs[True].tobytes() == lgs[False].tobytes()
    nxt[0] = nxt[1] = int(np.argmax(lgs[True][0]))
n, o = np.array(ts[True]) * 1e3, np.array(ts[False]) * 1e3
print(f"depth {len(toks)}, {a.steps} steps each, alternating; load {os.getloadavg()}")
print(f"  new: median {np.median(n):.2f} ms  q1 {np.percentile(n, 25):.2f}  q3 {np.percentile(n, 75):.2f}")
print(f"  old: median {np.median(o):.2f} ms  q1 {np.percentile(o, 25):.2f}  q3 {np.percentile(o, 75):.2f}")
print(f"  new/old of medians {np.median(n) / np.median(o):.3f}; median of paired ratios "
      f"{np.median(n / o):.3f}; logits byte-equal every step: {same}")
