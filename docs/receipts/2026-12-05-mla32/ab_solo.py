"""Solo against crew for one-row products, in one process, alternating step by step: a
batch-1 decode step of the GLM-4.7-Flash-shaped file with kernels/kquant_cpu's SOLO_BYTES as
given (A) or B (0: every one-row product past CREW_SERIAL_MACS on the crew). Logits compared
byte for byte every step (the cut changes no byte).

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-mla32/ab_solo.py [--a BYTES] [--b BYTES] [--steps 100]
"""
import argparse
import os
import time
from pathlib import Path

import server  # noqa: F401,I001
import numpy as np

ap = argparse.ArgumentParser()
ap.add_argument("--a", type=int, default=1 << 27)
ap.add_argument("--b", type=int, default=0)
ap.add_argument("--steps", type=int, default=100)
ap.add_argument("--depth", type=int, default=0, help="both streams prefilled to this depth first")
ap.add_argument("--file", default="/tmp/mla-bench/glm-4.7-flash-L4-Q8_0.gguf")
a = ap.parse_args()
import kernels
kernels.init()
from kernels import kquant_cpu
from bench.mla_cpu import Deep
from server.ranks.steps import BeginStep, Chunk, RoundStep

e = Deep(Path(a.file), 2, max(a.depth + a.steps + 8, 64))
pages = e.ctx // 16
nxt = {}
toks = [int(t) for t in np.random.default_rng(a.depth).integers(0, e.spec.vocab, max(a.depth, 1))]
for s in (0, 1):
    e.eng.apply(BeginStep(s, tuple(range(s * pages, (s + 1) * pages))))
    for c in range(0, len(toks), 512):
        lg = e.eng.apply(RoundStep((Chunk(s, c, tuple(toks[c:c + 512]), True),)))
    nxt[s] = int(np.argmax(lg[0]))
D = len(toks) - 1
ts = {a.a: [], a.b: []}
same = True
c0 = time.process_time()
for k in range(a.steps):
    lgs = {}
    for s, sb in ((0, a.a), (1, a.b)) if k % 2 == 0 else ((1, a.b), (0, a.a)):
        kquant_cpu.SOLO_BYTES = sb
        t = time.perf_counter()
        lgs[s] = e.eng.apply(RoundStep((Chunk(s, D + 1 + k, (nxt[s],)),)))
        ts[sb].append(time.perf_counter() - t)
    same &= lgs[0].tobytes() == lgs[1].tobytes()
    nxt[0] = nxt[1] = int(np.argmax(lgs[0][0]))
A, B = np.array(ts[a.a]) * 1e3, np.array(ts[a.b]) * 1e3
print(f"depth {D + 1}, {a.steps} steps each, alternating; load {os.getloadavg()}")
for name, v in ((f"SOLO_BYTES {a.a}", A), (f"SOLO_BYTES {a.b}", B)):
    print(f"  {name:22s} median {np.median(v):.2f} ms  q1 {np.percentile(v, 25):.2f}  q3 {np.percentile(v, 75):.2f}")
print(f"  B/A of medians {np.median(B) / np.median(A):.3f}; median of paired ratios "
      f"{np.median(B / A):.3f}; logits byte-equal every step: {same}")
