"""One matrix stage at 2 threads through the team (regions), variants of the 1-row tile."""
import sys, time, os, numpy as np
sys.path.insert(0, '/work/main')
import numba
from numba import njit
from kernels import blocks_vec as V, forward_cpu as F
from kernels.team_cpu import WIDTH, region_piece, finish, finish_many, wait
from bench.cpu_stage_time import matrices_by_role
from server.engine.build import open_model

def make_read():
    @njit(boundscheck=False, nogil=True, fastmath=True)
    def rows(x, xsum, data, out, lo, hi):
        flat = data.reshape(-1).view(np.float32)
        rb = data.shape[1]
        acc = np.zeros(16, np.float32)
        a = lo * rb // 4
        b = hi * rb // 4
        i = a
        while i + 16 <= b:
            for j in range(16):
                acc[j] += flat[i + j]
            i += 16
        out[0, lo] = acc.sum()
    return rows


def make_rows(kind, R, pf):
    if R == 0:
        return make_read()
    V.PREFETCH_ROWS = pf
    t = V._make_tile(kind, R, 1, V.TABLE)
    t1 = V._make_tile(kind, 1, 1, V.TABLE)
    V.PREFETCH_ROWS = 8
    @njit(boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        n = lo
        while n + R <= hi:
            r = t(data, n, x, 0, xsum[0])
            for a in range(R):
                out[0, n + a] = r[a]
            n += R
        while n < hi:
            out[0, n] = t1(data, n, x, 0, xsum[0])
            n += 1
    return rows

def make_member(rows, each):
    @njit(boundscheck=False, nogil=True)
    def matrix(ctr, s, m, n, x, xs, w, out):
        N = w.shape[0]
        per = max(4, min((N + 15) // 16 // n, N * w.shape[1] // (n * 65536)))
        pieces = per * n
        done = 0
        for k in range(n):
            r = (m + k) % n
            p = region_piece(ctr, s, r, per, k > 0)
            while p >= 0:
                rows(x, xs, w, out, F._edge(N, pieces, p), F._edge(N, pieces, p + 1))
                if each:
                    finish(ctr, s)
                else:
                    done += 1
                p = region_piece(ctr, s, r, per, k > 0)
        finish_many(ctr, s, done)
        wait(ctr, s, pieces)

    @njit(boundscheck=False, nogil=True)
    def member(m, n, ctr, x, xs, ws, out):
        s = 0
        for w in ws:
            matrix(ctr, s, m, n, x, xs, w, out)
            s += 1
    return member

eng = open_model(None, progress=False).engine
roles = matrices_by_role(eng.weights)
role = sys.argv[1]
variants = [tuple(int(v) for v in a.split(",")) for a in sys.argv[2:]]  # R,pf[,each]
mats = roles[role]
kind = mats[0].kind
if role == "head":
    h = np.ascontiguousarray(mats[0].data)
    ws = (h, h.copy())                     # two copies: 60 MB, from memory each time
else:
    ws = tuple(np.ascontiguousarray(m.data) for m in mats)
K = ws[0].shape[1] // V.BLOCK_BYTES[kind] * 32
x = np.random.default_rng(0).standard_normal((1, K)).astype(np.float32)
xs = np.empty((1, K // 32), np.float32); V.block_sums(x, xs)
nbytes = sum(w.nbytes for w in ws)
teams = []
ref = None
for v in variants:
    R, pf = v[0], v[1]
    team = F.Team(make_member(make_rows(kind, R, pf), len(v) > 2 and v[2] == 1))
    out = np.zeros((1, ws[0].shape[0]), np.float32)
    ctr = np.zeros((len(ws) + 1, WIDTH), np.int64)
    team.run(2, (ctr, x, xs, ws, out))
    if R and ref is None:
        ref = out.copy()
    assert not R or out.tobytes() == ref.tobytes()
    teams.append(team)
res = {v: [] for v in variants}
for rep in range(40):
    for v, team in zip(variants, teams):
        out = np.zeros((1, ws[0].shape[0]), np.float32)
        ctr = np.zeros((len(ws) + 1, WIDTH), np.int64)
        t = time.perf_counter(); team.run(2, (ctr, x, xs, ws, out)); res[v].append(time.perf_counter() - t)
for v in variants:
    a = sorted(res[v])
    print(role, kind, "R,pf", v, f"median {a[len(a)//2]*1e3:.3f} ms  {nbytes/a[len(a)//2]/1e9:.1f} GB/s  min {a[0]*1e3:.3f} ms {nbytes/a[0]/1e9:.1f} GB/s")
