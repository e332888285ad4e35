"""qkvz-shaped Q8_0 product at one x row, cold (a pool of copies rotated, 1.6 GB): solo vs crew, alternated; min/q1/median."""
import os, sys, time
import numpy as np
import kernels; kernels.init()
from kernels import kquant_cpu, blocks_vec
blocks_vec.CREW_SERIAL_MACS = int(os.environ.get("SERIAL", blocks_vec.CREW_SERIAL_MACS))
from bench.q8_kernels import q8_matrix
rng = np.random.default_rng(0)
N, K = int(os.environ.get("N", 12352)), int(os.environ.get("K", 2048))
W0 = q8_matrix(rng, N, K)
pool = [W0.copy() for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 60)]
x = rng.standard_normal((1, K)).astype(np.float32)
reps = int(sys.argv[1]) if len(sys.argv) > 1 else 120
print("load", os.getloadavg(), flush=True)
res = {"solo": [], "crew": []}
for mode in res: kquant_cpu.SOLO_ROWS = 1 if mode == "solo" else 0; kquant_cpu.q80_matmul(x, W0)
k = 0
for r in range(reps):
    for mode in ("solo", "crew"):
        kquant_cpu.SOLO_ROWS = 1 if mode == "solo" else 0
        W = pool[k % len(pool)]; k += 1
        t = time.perf_counter(); kquant_cpu.q80_matmul(x, W); dt = time.perf_counter() - t
        res[mode].append(dt)
nb = W0.nbytes
for mode, ts in res.items():
    ts = np.array(ts)
    print(f"cold {nb/1e6:.1f} MB {mode}: min {ts.min()*1e3:.3f} ms ({nb/ts.min()/1e9:.1f} GB/s) q1 {np.quantile(ts,.25)*1e3:.3f} ({nb/np.quantile(ts,.25)/1e9:.1f} GB/s) median {np.median(ts)*1e3:.3f} ({nb/np.median(ts)/1e9:.1f})", flush=True)
print("load", os.getloadavg())
