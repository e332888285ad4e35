import time, statistics, numpy as np, kernels
kernels.init()
from kernels import blocks_vec as bv
rng = np.random.default_rng(0)
N, K = 3072, 576
ds = [rng.integers(0, 255, (N, K // 32 * 20), dtype=np.uint8) for _ in range(30)]
for d in ds:
    blk = d.reshape(N, K // 32, 20); blk[:, :, 0:2] = np.frombuffer(np.float16(0.01).tobytes(), np.uint8); blk[:, :, 2:4] = np.frombuffer(np.float16(-0.05).tobytes(), np.uint8)
f = bv.ROW_KERNELS["Q4_1"]
for M in (1, 4, 8):
    x = rng.standard_normal((M, K)).astype(np.float32); xs = np.empty((M, 18), np.float32); bv.block_sums(x, xs)
    out = np.empty((M, N), np.float32)
    cold, hot = [], []
    for rep in range(8):
        t0 = time.perf_counter()
        for d in ds: f(x, xs, d, out, 0, N)
        cold.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for d in ds[:1] * 30: f(x, xs, d, out, 0, N)
        hot.append(time.perf_counter() - t0)
    c, h = statistics.median(cold) * 1e3, statistics.median(hot) * 1e3
    print(f"gate_up Q4_1 x30 at {M} rows: 30 matrices (DRAM) {c:.2f} ms, one matrix 30x (L2) {h:.2f} ms; {30*N*K*M/h/1e6:.1f} G FMA/s hot")
