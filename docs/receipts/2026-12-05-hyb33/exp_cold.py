"""8 of 256 experts (Qwen3.5-35B: gate|up 2x[512 x 2048], down [2048 x 512], Q8_0) at one token, cold:
crew of 2 vs the caller alone (numba threads 1), alternated; ms and GB/s."""
import os, sys, time
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu
from bench.q8_kernels import q8_matrix
rng = np.random.default_rng(0)
E = 256
def stack(n, k):
    m = q8_matrix(rng, 64 * n, k).reshape(64, n, -1)
    return np.concatenate([m] * (E // 64))       # 256 experts (4 copies of 64: still cold, 2.2 GB apart)
gu = stack(1024, 2048)           # gate|up of an expert as one 1024-row matrix
dn = stack(2048, 512)
print("stacks MB", gu.nbytes / 1e6, dn.nbytes / 1e6, "load", os.getloadavg(), flush=True)
x = rng.standard_normal((8, 2048)).astype(np.float32)
a = rng.standard_normal((8, 512)).astype(np.float32)
q, dx = kquant_cpu.quantize_q80(x); qa, dxa = kquant_cpu.quantize_q80(a)
offs = np.arange(9, dtype=np.int64)
res = {}
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 100
for r in range(reps + 1):
    ex = np.sort(rng.choice(E, 8, replace=False)).astype(np.int64)
    for n in (1, 2):
        numba.set_num_threads(n)
        t = time.perf_counter(); kquant_cpu.q80_grouped_q(q, dx, gu, ex, offs); t1 = time.perf_counter()
        kquant_cpu.q80_grouped_q(qa, dxa, dn, ex, offs); t2 = time.perf_counter()
        if r:
            res.setdefault(("gate|up", n), []).append(t1 - t); res.setdefault(("down", n), []).append(t2 - t1)
        ex = np.sort(rng.choice(E, 8, replace=False)).astype(np.int64)
for (k, n), ts in sorted(res.items()):
    nb = 8 * (gu.nbytes if k == "gate|up" else dn.nbytes) / E
    ts = np.array(ts)
    print(f"{k:8s} {nb/1e6:.1f} MB, {n} thread(s): min {ts.min()*1e3:.3f} ms ({nb/ts.min()/1e9:.1f} GB/s) q1 {np.quantile(ts,.25)*1e3:.3f} median {np.median(ts)*1e3:.3f} ({nb/np.median(ts)/1e9:.1f} GB/s)", flush=True)
print("load", os.getloadavg())
