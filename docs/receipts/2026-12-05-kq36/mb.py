import sys, time, os
sys.path.insert(0, "/tmp/kq36")
import server  # noqa
import numpy as np
import kernels; kernels.init()
import numba
from kernels import kquant_cpu as KQ
from gb import groups
sys.path.insert(0, "tests/model")
from test_kquant_q8 import random_rows
thr = int(sys.argv[1]); reps = int(sys.argv[2]); kinds = sys.argv[3].split(",") if len(sys.argv) > 3 else ["Q4_K"]
numba.set_num_threads(thr)
rng = np.random.default_rng(0)
ex, offs = groups(512, 128, 8, rng)
R = int(offs[-1])
tag = "new" if "kq36-base" not in os.getcwd() else "old"
res = []
for kind, N, K in [(k, N, K) for k in kinds for N, K in ((2048, 768), (768, 2048))]:
    st = np.stack([random_rows(rng, kind, N, K) for _ in range(128)])
    x = rng.standard_normal((R, K)).astype(np.float32)
    q, dx, gs = KQ.quantize(x)
    f = lambda: KQ.grouped_quantized(q, dx, gs, kind, st, ex, offs)
    y = f(); res.append(y)
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter(); c = time.process_time(); f(); dt = time.perf_counter() - t
        if dt < best: best, bc = dt, time.process_time() - c
    mac = R * N * K
    print(f"{tag} {kind} N={N} K={K} thr={thr}: {best*1e3:7.2f} ms {mac/best/1e9:6.1f} GMAC/s wall {mac/bc/1e9:6.1f} a core ({bc/best:.2f} cores)", flush=True)
np.save(f"/tmp/kq36/out_{tag}.npy", np.concatenate([r.ravel() for r in res]))
print("load", open("/proc/loadavg").read().strip())
