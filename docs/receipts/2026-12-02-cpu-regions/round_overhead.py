import sys, os, time
sys.path.insert(0, os.getcwd())
import numba; numba.set_num_threads(2)
import numpy as np
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from kernels import forward_cpu
eng = open_model(None, progress=False).engine
TT = []
orig = forward_cpu.Team._run
def timed(self, n, args):
    t = time.perf_counter(); orig(self, n, args); TT.append(time.perf_counter() - t)
forward_cpu.Team._run = timed
M = []
om = forward_cpu.Fused.run
def fr(self, *a):
    t = time.perf_counter(); r = om(self, *a); M.append(time.perf_counter() - t); return r
forward_cpu.Fused.run = fr
for rep in range(3):
    eng.apply(PoolStep(True, 20, 16, (eng.page_bytes(16),), 1, 300))
    eng.apply(BeginStep(0, tuple(range(20))))
    eng.apply(RoundStep((Chunk(0, 0, tuple(range(100, 164)), True),)))
    TT.clear(); M.clear()
    A = []
    tok = 5
    for i in range(100):
        t = time.perf_counter()
        lg = eng.apply(RoundStep((Chunk(0, 64 + i, (tok,), True),)))
        A.append(time.perf_counter() - t)
        tok = int(np.argmax(lg[0]))
    eng.apply(EndStep(0))
    med = lambda x: sorted(x)[len(x) // 2] * 1e3
    print(f"apply {med(A):.3f} ms, Fused.run {med(M):.3f}, team._run {med(TT):.3f}; apply - team {med([a - b for a, b in zip(A, TT)]):.3f} ms, Fused.run - team {med([a - b for a, b in zip(M, TT)]):.3f}")
