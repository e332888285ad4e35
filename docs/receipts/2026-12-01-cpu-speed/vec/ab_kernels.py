"""A/B in one process, interleaved, 1 thread, CPU time (min of 15): the former unpack-then-dot
numba kernel (kernels/blocks_cpu._make over deq_*) against kernels/blocks_vec (explicit LLVM
vectors) on the default model's shapes. Run from the worktree root: python3 THIS_FILE."""
import os, sys, time, json
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../.."))
import numpy as np, numba
from gguf.quants import quantize
from gguf import GGMLQuantizationType as T
from kernels import blocks_cpu as B, blocks_vec as V
numba.set_num_threads(1)
with B._noalias():
    OLD = {k: B._make(B.DEQ[k]) for k in ("Q4_1", "Q8_0")}
def old(x, kind, data):
    out = np.empty((x.shape[0], data.shape[0]), np.float32)
    with B._noalias():
        OLD[kind](x, data, B.F16, out)
    return out
def cpu(f, reps=15):
    f(); best = 1e9
    for _ in range(reps):
        t = time.process_time(); f(); best = min(best, time.process_time() - t)
    return best
rng = np.random.default_rng(0)
rows = []
for kind, N, K in [("Q4_1", 960, 576), ("Q4_1", 3072, 576), ("Q4_1", 576, 1536), ("Q8_0", 49152, 576)]:
    W = rng.standard_normal((N, K)).astype(np.float32) * 0.02
    data = np.ascontiguousarray(quantize(W, T[kind]).reshape(N, -1))
    for M in (1, 8, 64):
        x = rng.standard_normal((M, K)).astype(np.float32)
        reps = 15 if N * M < 400000 else 4
        a, b = [], []
        for _ in range(2):                       # interleaved: old, new, old, new
            a.append(cpu(lambda: old(x, kind, data), reps)); b.append(cpu(lambda: V.matmul(x, kind, data), reps))
        a, b = min(a), min(b)
        r = {"kind": kind, "N": N, "K": K, "M": M, "old_ms": a * 1e3, "vec_ms": b * 1e3,
             "old_GMACs": N * K * M / a / 1e9, "vec_GMACs": N * K * M / b / 1e9, "speedup": a / b}
        rows.append(r)
        print(json.dumps({k: (round(v, 3) if isinstance(v, float) else v) for k, v in r.items()}), flush=True)
print("loadavg", os.getloadavg())
