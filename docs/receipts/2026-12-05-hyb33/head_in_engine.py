"""In one engine process: the head's product inside decode steps (timed by a wrapper on
kquant_cpu.q80_matmul where the matrix is the head) vs the same call made alone between steps."""
import os, sys, time
from pathlib import Path
import server  # noqa
import numpy as np
import kernels; kernels.init()
from bench.moe_cpu import Foldserve
from kernels import kquant_cpu
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path("/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"), 2)
head = f.eng.model.w.lm_head.data
inner = kquant_cpu.q80_matmul
got = []
def timed(x, data, *a, **k):
    t = time.perf_counter()
    try:
        return inner(x, data, *a, **k)
    finally:
        if data is head: got.append(time.perf_counter() - t)
kquant_cpu.q80_matmul = timed
import kernels.qmatmul as QM
alone, step = [], []
x = np.random.default_rng(0).standard_normal((1, 2048)).astype(np.float32)
f._begin(0)
lg = f.eng.apply(RoundStep((Chunk(0, 0, (1,)),))); nxt = int(np.argmax(lg[0]))
print("load", os.getloadavg(), flush=True)
for k in range(40):
    t = time.perf_counter(); lg = f.eng.apply(RoundStep((Chunk(0, 1 + k, (nxt,)),))); st = time.perf_counter() - t
    nxt = int(np.argmax(lg[0])); step.append(st)
    t = time.perf_counter(); inner(x, head); alone.append(time.perf_counter() - t)
inside = got[1:]
for name, v in (("step", step), ("head inside a step", inside), ("head alone between steps", alone)):
    v = np.array(v)
    print(f"{name:26s} min {v.min()*1e3:.2f} q1 {np.quantile(v,.25)*1e3:.2f} median {np.median(v)*1e3:.2f} ms", flush=True)
print("load", os.getloadavg())
