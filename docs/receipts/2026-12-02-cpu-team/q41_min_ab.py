import numpy as np, time, sys, os
sys.path.insert(0, '/tmp/attx')
import numba
numba.set_num_threads(int(os.environ.get("T", "1")))
import bv_old
from kernels import blocks_vec as V
rng = np.random.default_rng(0)
for kind in ("Q4_1", "Q8_0", "Q4_0"):
    N, K = 3072, 576
    nbytes = V.BLOCK_BYTES[kind]
    data = rng.integers(0, 255, (N, K // 32 * nbytes), dtype=np.uint8)
    d3 = data.reshape(N, K // 32, nbytes); d3[:, :, 1] = 0x2c
    if kind == "Q4_1": d3[:, :, 3] = 0x2c
    for M in (1, 3, 4, 8, 13, 64):
        x = rng.standard_normal((M, K)).astype(np.float32); xs = np.empty((M, K // 32), np.float32); V.block_sums(x, xs)
        outs = []
        ts = []
        for mod in (bv_old, V):
            out = np.empty((M, N), np.float32); k = mod.KERNELS[kind]; k(x, xs, data, out); outs.append(out)
        reps = max(3, 400 // M)
        tt = [[], []]
        for r in range(5):
            for i, mod in enumerate((bv_old, V)):
                k = mod.KERNELS[kind]; t = time.perf_counter()
                for _ in range(reps): k(x, xs, data, outs[i])
                tt[i].append((time.perf_counter() - t) / reps)
        a, b = min(tt[0]), min(tt[1])
        print(f"{kind} M {M:3d}: old {a*1e3:.3f} new {b*1e3:.3f} ms  new/old {b/a:.3f}  equal {outs[0].tobytes() == outs[1].tobytes()}")
