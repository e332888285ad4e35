"""One-thread K-quant products, GMAC/s: python mb.py TAG REPS SPEC... with SPEC kind:N:K:g
(grouped_quantized, 128 experts at a pp512 grouping, top 8: 4096 rows) or kind:N:K:M (dense
`matmul` of M rows). Run from the tree to time (PYTHONPATH=tree); the load average is printed."""
import sys, time, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu as KQ
from gb import groups
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
tag, reps = sys.argv[1], int(sys.argv[2])
numba.set_num_threads(1)
for spec in sys.argv[3:]:
    kind, N, K, m = spec.split(":")
    N, K = int(N), int(K)
    rng = np.random.default_rng(0)
    if m == "g":
        ex, offs = groups(512, 128, 8, rng)
        R = int(offs[-1])
        base = random_rows(rng, kind, N, K)      # one expert's rows, 128 copies rolled (distinct bytes a row)
        st = np.stack([np.roll(base, e, axis=0) for e in range(128)])
        x = rng.standard_normal((R, K)).astype(np.float32)
        q, dx, gs = KQ.quantize(x)
        f = lambda: KQ.grouped_quantized(q, dx, gs, kind, st, ex, offs)
    else:
        R = int(m)
        w = random_rows(rng, kind, N, K)
        x = rng.standard_normal((R, K)).astype(np.float32)
        f = lambda: KQ.matmul(x, kind, w)
    f()
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter(); f(); dt = time.perf_counter() - t
        best = min(best, dt)
    print(f"{tag} {kind} N={N} K={K} {m}: {best*1e3:8.2f} ms {R*N*K/best/1e9:6.1f} GMAC/s  load {open('/proc/loadavg').read().split()[0]}", flush=True)
