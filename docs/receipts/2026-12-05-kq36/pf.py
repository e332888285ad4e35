"""down shape (Q4_K N=2048 K=768) at a pp512 grouping: fresh out vs reused out, and quantize cost."""
import sys, time, resource
sys.path.insert(0, "/tmp/kq36")
import server  # noqa
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu as KQ
from gb import rand_stack, groups

thr = int(sys.argv[1]); reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
numba.set_num_threads(thr)
rng = np.random.default_rng(0)
ex, offs = groups(512, 128, 8, rng)
R = int(offs[-1])
for kind, N, K in (("Q4_K", 2048, 768), ("Q4_K", 768, 2048)):
    st = rand_stack(kind, 128, N, K, rng)
    x = rng.standard_normal((R, K)).astype(np.float32)
    q, dx, gs = KQ.quantize(x)
    keep = np.empty((R, N), np.float32); keep[:] = 0
    def fresh():
        return KQ.grouped_quantized(q, dx, gs, kind, st, ex, offs)
    def reuse():
        return KQ.grouped_q(q, dx, gs, kind, st, ex, offs, keep)
    def quant():
        return KQ.quantize(x)
    for name, f in (("fresh", fresh), ("reuse", reuse), ("fresh", fresh), ("reuse", reuse), ("quantize", quant)):
        f()
        best = 1e9
        for _ in range(reps):
            r0 = resource.getrusage(resource.RUSAGE_SELF)
            t, c = time.perf_counter(), time.process_time()
            y = f(); del y
            dt = time.perf_counter() - t; dc = time.process_time() - c
            r1 = resource.getrusage(resource.RUSAGE_SELF)
            if dt < best: best, bc, flt = dt, dc, r1.ru_minflt - r0.ru_minflt
        mac = R * N * K
        print(f"{kind} N={N} K={K} {name:8s} thr={thr}: {best*1e3:7.2f} ms {mac/best/1e9:6.1f} GMAC/s wall {mac/bc/1e9:6.1f} cpu ({bc/best:.2f} cores) minflt {flt}", flush=True)
print("load", open("/proc/loadavg").read().strip())
