import server, sys, time
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path(sys.argv[1]), 2)
from kernels import team_cpu, kquant_cpu
log = []
orig = team_cpu.Crew.run
def run(self, n, args):
    t = time.perf_counter(); c = time.process_time()
    orig(self, n, args)
    dt = time.perf_counter() - t; dc = time.process_time() - c
    ctr = args[0]
    regs = [(int(ctr[0, 8 + r]) & 0xFFFFFFFF, int(ctr[0, 8 + r]) >> 32) for r in range(n)]
    shape = getattr(args[5] if len(args) > 5 else None, "shape", None)
    log.append((getattr(self.member, "__name__", "?"), self, tuple(a.shape for a in args[1:] if hasattr(a, "shape"))[:5], regs, dt, dc))
team_cpu.Crew.run = run
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
for rep in range(2):
    log.clear()
    f._begin(0); f.eng.apply(RoundStep((Chunk(0, 0, toks),))); f._end(1)
for name, crew, shapes, regs, dt, dc in log:
    print(f"{dt*1e3:8.2f} ms {dc/dt:5.2f} cores regs(front,back)={regs} {shapes} {id(crew)%10000}")
