import server, sys, time
from pathlib import Path
from collections import defaultdict
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path(sys.argv[1]), 2)
from kernels import kquant_cpu as K, team_cpu, moe_cpu
acc = defaultdict(lambda: [0.0, 0.0, 0])
def wrap(mod, name, lab=None):
    inner = getattr(mod, name)
    def timed(*a, **k):
        L = lab(a) if lab else name
        t = time.perf_counter(); c = time.process_time()
        try:
            return inner(*a, **k)
        finally:
            r = acc[L]; r[0] += time.perf_counter() - t; r[1] += time.process_time() - c; r[2] += 1
    setattr(mod, name, timed)
wrap(K, "quantize", lambda a: f"quantize {a[0].shape}")
wrap(K, "_aux", lambda a: f"_aux {a[0]} {a[2].shape}")
wrap(K, "grouped_q", lambda a: f"grouped_q {a[3]} M={a[0].shape[0]} N={a[4].shape[1]}")
wrap(K, "grouped_matmul", lambda a: f"grouped_matmul {a[1]} M={a[0].shape[0]} N={a[2].shape[1]}")
wrap(moe_cpu, "gate_up_halves")
wrap(moe_cpu, "combine_grouped")
orig = team_cpu.Crew.run
def run(self, n, args):
    t = time.perf_counter(); c = time.process_time()
    orig(self, n, args)
    r = acc["crew.run " + str(args[5].shape if len(args) > 5 else "")]; r[0] += time.perf_counter() - t; r[1] += time.process_time() - c; r[2] += 1
team_cpu.Crew.run = run
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
for rep in range(2):
    acc.clear()
    t = time.perf_counter()
    f._begin(0); f.eng.apply(RoundStep((Chunk(0, 0, toks),))); f._end(1)
    print("prefill", (time.perf_counter() - t) * 1e3)
for k, (w, c, n) in sorted(acc.items(), key=lambda kv: -kv[1][0]):
    print(f"{k:60s} {w*1e3:8.2f} ms {c/max(w,1e-9):5.2f} cores {n} calls")
