# kda_cpu.chunk at GLM-5.3's KDA shape (H 64, D 128, K 4), n positions: time, and the bytes
import sys, time
import kernels; kernels.init()
import numba, numpy as np
from kernels import kda_cpu
H, D, K = 64, 128, 4
C = 3 * H * D
rng = np.random.default_rng(0)
f32 = np.float32
def inputs(n):
    return dict(mix=rng.standard_normal((n, C)).astype(f32), f=rng.standard_normal((n, H * D)).astype(f32),
                b=rng.standard_normal((n, H)).astype(f32), gate=rng.standard_normal((n, H * D)).astype(f32))
conv_w = (rng.standard_normal((C, K)) * 0.3).astype(f32)
A_log = rng.standard_normal(H).astype(f32); dt = rng.standard_normal(H * D).astype(f32)
nw = rng.uniform(0.5, 1.5, D).astype(f32)
out = {}
for n in (1, 512):
    x = inputs(n)
    for th in (1, 2):
        numba.set_num_threads(th)
        best = 1e9
        for r in range(3 if n == 1 else 2):
            st = np.zeros((H, D, D), f32); win = np.zeros((K - 1, C), f32)
            t = time.perf_counter()
            o = kda_cpu.chunk(x["mix"], x["f"], x["b"], x["gate"], conv_w, A_log, dt, nw, 1e-6, win, st, -5.0)
            best = min(best, time.perf_counter() - t)
        out[(n, th)] = (o, st, win)
        print(f"n {n} threads {th}: {best * 1e3:.2f} ms  load {open('/proc/loadavg').read().split()[0]}", flush=True)
    a, b = out[(n, 1)], out[(n, 2)]
    print("  1 thread == 2 threads bytes:", all(np.array_equal(u.view(np.uint32), v.view(np.uint32)) for u, v in zip(a, b)))
np.save(sys.argv[1], np.concatenate([out[(512, 2)][0].ravel(), out[(512, 2)][1].ravel()]))
