"""Tile plans A/B on the default model's real matrices (30 layers of each role, then the head),
one thread, in the crew's 64 KB pieces, thread CPU time, plans alternated (order rotated each
rep); "old" is the tree's own blocks_vec rows (run it in main's tree), "final" drafts35's plan
for 1-9 x rows run group by group from Python, "2x4s" the same with 8 rows as 2x4 + 2x4.
Bytes are checked equal to "old" for every plan, matrix and M first.

  NUMBA_NUM_THREADS=1 PYTHONPATH=$PWD python tiles.py 1,6,7,8,9 7
"""
import sys, time, statistics, os
import numpy as np
import kernels
kernels.init()
from numba import njit
from kernels import blocks_vec as bv
from kernels.blocks_vec import _make_tile, side_by_side, block_sums
from server.engine.build import open_model

TABLE = bv.TABLE

def make_group(kind, R, C):
    t = _make_tile(kind, R, C, TABLE)
    t11 = _make_tile(kind, 1, 1, TABLE)
    @njit(boundscheck=False, nogil=True)
    def g(x, xsum, data, out, lo, hi, i):
        xst = side_by_side(xsum, i, C)
        n = lo
        while n + R <= hi:
            r = t(data, n, x, i, xst)
            for a in range(R):
                for c in range(C):
                    out[i + c, n + a] = r[C * a + c]
            n += R
        for c in range(C):
            for m in range(n, hi):
                out[i + c, m] = t11(data, m, x, i + c, xsum[i + c])
    return g

def make_group2(kind, R, C1, C2):
    t = bv._make_tile2(kind, R, C1, C2, TABLE)
    t11 = _make_tile(kind, 1, 1, TABLE)
    C = C1 + C2
    @njit(boundscheck=False, nogil=True)
    def g(x, xsum, data, out, lo, hi, i):
        xst = side_by_side(xsum, i, C)
        ws = np.empty(x.shape[1] * R, np.float32)
        n = lo
        while n + R <= hi:
            r = t(data, n, x, i, xst, ws)
            for a in range(R):
                for c in range(C):
                    out[i + c, n + a] = r[C * a + c]
            n += R
        for c in range(C):
            for m in range(n, hi):
                out[i + c, m] = t11(data, m, x, i + c, xsum[i + c])
    return g

eng = open_model(None, progress=False).engine
w = eng.model.fused.w
kinds = eng.model.fused.kinds
roles = {"qkv": (w.wqkv, kinds[0]), "o": (w.wo, kinds[1]), "gu": (w.wgu, kinds[2]), "down": (w.wdown, kinds[3]), "head": ((w.wh,), kinds[4])}
shapes = [(2, 6), (1, 7), (1, 8), (1, 9), (2, 4), (2, 3), (4, 2), (2, 5), (4, 1)]
_unused = [ (1, 4), (1, 8), (2, 4), (2, 3), (4, 2), (2, 5), (1, 5), (1, 9), (2, 2), (1, 3), (1, 6), (1, 7), (2, 6), (4, 1)]
groups = {}
SPLITS = [(2, 3, 4), (2, 4, 4), (2, 5, 4), (2, 4, 5)]
for kind in set(kinds):
    for R, C in shapes:
        groups[(kind, R, C)] = make_group(kind, R, C)
    for R, C1, C2 in SPLITS:
        groups[(kind, R, C1 + C2)] = make_group2(kind, R, C1, C2)

def plan_new(M, K):
    out, i = [], 0
    while i < M:
        rem = M - i
        if rem == 1: out.append((4, 1)); i += 1
        elif rem == 2: out.append((4, 2)); i += 2
        elif rem == 3: out.append((2, 3)); i += 3
        elif rem == 5: out.append((2, 5)); i += 5
        elif rem == 6: out.append((2, 3)); i += 3
        else: out.append((2, 4)); i += 4
    return out

def plan_wide(M, K):
    return {1: [(4, 1)], 2: [(4, 2)], 3: [(2, 3)], 4: [(2, 4)], 5: [(2, 5)], 6: [(2, 6)], 7: [(2, 7)], 8: [(2, 8)], 9: [(2, 4), (2, 5)]}[M]
def plan_w3(M, K):
    return {1: [(4, 1)], 2: [(4, 2)], 3: [(3, 3)], 4: [(2, 4)], 5: [(2, 5)], 6: [(3, 3), (3, 3)], 7: [(2, 4), (3, 3)], 8: [(2, 4), (2, 4)], 9: [(3, 3), (3, 3), (3, 3)]}[M]
def plan_final(M, K):
    """blocks_vec._make_rows' plan on this branch (drafts35) for 1-9 rows"""
    return {1: [(4, 1)], 2: [(4, 2)], 3: [(2, 3)], 4: [(2, 4)], 5: [(2, 5)], 6: [(2, 6)],
            7: [(2, 4), (2, 3)], 8: [(1, 8)] if 8 * K * 4 <= 24 * 1024 else [(2, 4), (2, 4)],
            9: [(2, 4), (2, 5)]}[M]
PLANS = {
  "old": None,
  "main": plan_final,
  # "1xC": lambda M, K: {7: [(1, 7)], 8: [(1, 8)], 9: [(1, 9)]}.get(M, plan_final(M, K)),
  "split": lambda M, K: {7: [(2, 7)], 8: [(2, 8)], 9: [(2, 9)]}.get(M, plan_final(M, K)),
}
rng = np.random.default_rng(0)
sizes = [int(v) for v in sys.argv[1].split(",")] if len(sys.argv) > 1 else [2, 3, 4, 5, 6, 7, 8, 9]
reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5

XS = {}
def xfor(role, M):
    mats, kind = roles[role]
    K = (mats[0].shape[1] // bv.BLOCK_BYTES[kind]) * 32
    if (role, M) not in XS:
        x = np.random.default_rng(M * 10000 + K).standard_normal((M, K)).astype(np.float32)
        xs = np.empty((M, K // 32), np.float32); block_sums(x, xs)
        XS[(role, M)] = (x, xs, K, kind)
    return XS[(role, M)]

def one(plan, role, li, M, out=None):
    mats, kind = roles[role]
    x, xs, K, kind = xfor(role, M)
    d = mats[li]
    if out is None:
        out = np.empty((M, d.shape[0]), np.float32)
    N = d.shape[0]
    step = max(16, (65536 // d.shape[1]) // 16 * 16)     # the crew's pieces (PIECE_BYTES)
    for lo in range(0, N, step):
        hi = min(N, lo + step)
        if plan == "old":
            bv.ROW_KERNELS[kind](x, xs, d, out, lo, hi)
        else:
            i = 0
            for R, C in PLANS[plan](M, K):
                groups[(kind, R, C)](x, xs, d, out, lo, hi, i)
                i += C
    return out

def sweep(plan, M):
    """the round's order: layer by layer, then the head; per role thread time"""
    t = dict.fromkeys(roles, 0.0)
    for li in range(30):
        for role in ("qkv", "o", "gu", "down"):
            t0 = time.thread_time()
            one(plan, role, li, M)
            t[role] += time.thread_time() - t0
    t0 = time.thread_time()
    one(plan, "head", 0, M)
    t["head"] += time.thread_time() - t0
    return t

for role in roles:
    for M in sizes:
        for li in range(len(roles[role][0])):
            ref = one("old", role, li, M)
            for p in PLANS:
                assert np.array_equal(ref, one(p, role, li, M)), (p, role, M)
print("bytes equal", flush=True)
print("load", open("/proc/loadavg").read().strip())
T = {}
names = list(PLANS)
for rep in range(reps):
    for M in sizes:
        for j in range(len(names)):
            p = names[(rep + j) % len(names)]
            t = sweep(p, M)
            for role in roles:
                T.setdefault((p, role, M), []).append(t[role])
print("load", open("/proc/loadavg").read().strip())
import builtins
for stat, f in (("median", statistics.median), ("min", min)):
  print("ms, one thread, sum over 30 layers (head once);", stat, "of", reps)
  for role in roles:
    print(role, "     " + " ".join(f"{'M=%d' % M:>7s}" for M in sizes))
    for p in PLANS:
        print(f"  {p:5s} " + " ".join(f"{f(T[(p, role, M)]) * 1e3:7.2f}" for M in sizes))
  for p in PLANS:
    print("total", p, " ".join(f"{sum(f(T[(p, r, M)]) for r in roles) * 1e3:7.2f}" for M in sizes))
