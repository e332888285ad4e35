import sys, time, os
import kernels; kernels.init()
import numpy as np, numba
from numba import njit, prange
from kernels import kquant_cpu as KQ
sys.path.insert(0, os.environ.get("TESTS", "tests/model"))
from test_kquant_q8 import random_rows

@njit(parallel=True, cache=False)
def stream(a):
    s = np.zeros(64, np.int64)
    n = a.shape[0]
    per = n // 2
    for t in prange(2):
        acc = np.int64(0)
        for j in range(t * per, (t + 1) * per):
            acc ^= a[j]
        s[t * 8] = acc
    return s.sum()

@njit(cache=False)
def stream1(a):
    acc = np.int64(0)
    for j in range(a.shape[0]):
        acc ^= a[j]
    return acc

def timeit(f, reps=5):
    best = 1e9; cpu = []
    for _ in range(reps):
        t0 = time.perf_counter(); c0 = time.process_time()
        f()
        dt = time.perf_counter() - t0
        cpu.append((time.process_time() - c0) / dt)
        best = min(best, dt)
    return best, max(cpu)

what = sys.argv[1:] or ["bw", "head", "q4"]
rng = np.random.default_rng(0)
if "bw" in what:
    a = np.ones(2 << 30 >> 3, np.int64)
    stream(a); stream1(a[:1000])
    numba.set_num_threads(2)
    t, c = timeit(lambda: stream(a), 4); print(f"stream 2 thr: {a.nbytes/t/1e9:.1f} GB/s (cores {c:.2f})")
    t, c = timeit(lambda: stream1(a), 3); print(f"stream 1 thr: {a.nbytes/t/1e9:.1f} GB/s (cores {c:.2f})")
    del a
def bench(kind, N, K, Ms, thr=(1, 2)):
    w = random_rows(rng, kind, N, K)
    for M in Ms:
        x = rng.standard_normal((M, K)).astype(np.float32)
        for th in thr:
            numba.set_num_threads(th)
            KQ.matmul(x, kind, w)
            t, c = timeit(lambda: KQ.matmul(x, kind, w), 5)
            q = KQ.quantize(x)
            tq, _ = timeit(lambda: KQ.quantize(x), 3)
            print(f"{kind} {N}x{K} M={M} thr={th}: {t*1e3:.2f} ms {M*N*K/t/1e9:.1f} GMAC/s {w.nbytes/t/1e9:.1f} GB/s cores {c:.2f}  (quantize {tq*1e3:.3f} ms)", flush=True)
if "head" in what:
    bench("Q6_K", 151936, 2048, [1, 8])
if "q4" in what:
    bench("Q4_K", 1536, 2048, [1, 8, 32, 512])
if "q6" in what:
    bench("Q6_K", 2048, 768, [32, 512])
