import sys, time
import numpy as np
import kernels
kernels.init()
from kernels import gdn_cpu, _gdn_cpu_orig_tmp as old
rng = np.random.default_rng(0)
def case(nk, nv, dk, dv, K, n):
    C = 2 * nk * dk + nv * dv
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return (f(n, C), f(n, nv * dv), f(n, nv), f(n, nv), f(C, K) * 0.5, f(nv) * 0.3, f(nv), f(dv)), (f(nv, dk, dv) * 0.1, f(K - 1, C)), nk
for shp in [(2, 4, 8, 8, 4, 12), (2, 6, 32, 32, 4, 90), (2, 4, 16, 24, 4, 33), (16, 32, 128, 128, 4, int(sys.argv[1]))]:
    args, (st0, wi0), nk = case(*shp)
    res = []
    for mod in (old, gdn_cpu):
        for cuts in ([], list(range(1, shp[-1], 7))):
            st, wi = st0.copy(), wi0.copy()
            outs, lo = [], 0
            t = time.perf_counter()
            for hi in cuts + [shp[-1]]:
                outs.append(mod.chunk(*(x[lo:hi] for x in args[:4]), *args[4:], 1e-6, wi, st, nk)); lo = hi
            dt = time.perf_counter() - t
            res.append((np.concatenate(outs).tobytes(), st.tobytes(), wi.tobytes()))
            print(shp, mod.__name__, len(cuts), f"{dt*1e3:.1f} ms")
    print("equal", all(r == res[0] for r in res))
