import sys, time, os
sys.path.insert(0, os.getcwd())
import numpy as np, numba
from numba import njit
numba.set_num_threads(1)
from kernels import blocks_vec as V
from bench.cpu_stage_time import matrices_by_role
from server.engine.build import open_model

R, C = int(sys.argv[1]), int(sys.argv[2])
M = int(sys.argv[3]) if len(sys.argv) > 3 else 8
eng = open_model(None, progress=False).engine
roles = matrices_by_role(eng.weights)
kinds = {r: m[0].kind for r, m in roles.items()}
print(kinds, {r: (m[0].rows, m[0].cols) for r, m in roles.items()})

def make(kind):
    t = V._make_tile(kind, R, C, V.TABLE)
    @njit(boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        M = x.shape[0]
        i = 0
        while i + C <= M:
            xst = V.side_by_side(xsum, i, C)
            n = lo
            while n + R <= hi:
                r = t(data, n, x, i, xst)
                for a in range(R):
                    for c in range(C):
                        out[i + c, n + a] = r[a * C + c]
                n += R
            i += C
    return rows

rng = np.random.default_rng(0)
tot = {"old": 0.0, "new": 0.0}
for role, mats in roles.items():
    kind = kinds[role]
    new = make(kind)
    old = V.ROW_KERNELS[kind]
    K = mats[0].cols
    x = rng.standard_normal((M, K)).astype(np.float32)
    xs = np.empty((M, K // 32), np.float32); V.block_sums(x, xs)
    outs = {}
    for name, fn in (("old", old), ("new", new)):
        o = np.zeros((M, mats[0].rows), np.float32)
        fn(x, xs, mats[0].data, o, 0, mats[0].rows)
        outs[name] = o
    d = outs["old"] != outs["new"]
    from kernels.qmatmul import ref
    rf = ref(x, mats[0])
    print(role, "err old", np.abs(outs["old"]-rf).max(), "new", np.abs(outs["new"]-rf).max())
    if d.any(): print(role, "DIFF", d.sum(), np.argwhere(d)[:5].tolist(), np.abs(outs["old"]-outs["new"]).max())
    ts = {"old": [], "new": []}
    for rep in range(int(os.environ.get("REPS", 15))):
        for name, fn in (("old", old), ("new", new)):
            t0 = time.thread_time()
            for m in mats:
                fn(x, xs, m.data, outs[name], 0, m.rows)
            ts[name].append(time.thread_time() - t0)
    mo, mn = np.min(ts["old"]) * 1e3, np.min(ts["new"]) * 1e3
    macs = sum(m.rows * m.cols for m in mats) * M
    print(f"{role:8s} {kind} old {mo:7.2f} ms ({macs/mo/1e6:5.1f} GMAC/s)  new {mn:7.2f} ms ({macs/mn/1e6:5.1f})  new/old {mn/mo:.3f}")
    tot["old"] += mo; tot["new"] += mn
print("total old %.1f new %.1f ratio %.3f" % (tot["old"], tot["new"], tot["new"] / tot["old"]))
