import kernels; kernels.init()
import sys, time, numpy as np, numba
from kernels import kquant_cpu as KQ, moe_cpu
from kernels.blocks import Blocks, ExpertStack
numba.set_num_threads(int(sys.argv[1]))
reps = int(sys.argv[2])
rng = np.random.default_rng(0)
E, N, K, R = 128, 4096, 1408, 4096
def rows(kind, n, k):
    bb = {"Q5_0": 22, "Q8_0": 34}[kind]
    d = rng.integers(0, 256, (n, k // 32, bb), dtype=np.uint8)
    d[:, :, 0:2] = rng.uniform(1e-3, 1e-2, (n, k // 32, 1)).astype(np.float16).view(np.uint8)
    if kind == "Q8_0": pass
    return d.reshape(n, -1)
ids = np.sort(rng.integers(0, E, R))
experts, counts = np.unique(ids, return_counts=True)
offs = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
x = rng.standard_normal((R, K)).astype(np.float32)
for kind in sys.argv[3].split(","):
    kk, mode = kind.split(":")
    st = ExpertStack([Blocks(kk, N, K, rows(kk, N, K)) for _ in range(E)])
    f = lambda: moe_cpu.grouped_matmul(x, st, experts, offs, q8=True, q80=(mode == "q80"))
    f()
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); f(); ts.append(time.perf_counter() - t)
    t = min(ts)
    print(f"{kind:10s} {t*1e3:8.1f} ms  {R*N*K/t/1e9:6.1f} GMAC/s  (threads {sys.argv[1]})", flush=True)
