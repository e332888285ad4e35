import time, sys
import numpy as np
import kernels; kernels.init()
from numba import njit
from kernels import attention_cpu as ac
nq, nkv, hd, P = 9, 3, 64, 16
keys = 1000
R = int(sys.argv[1]) if len(sys.argv) > 1 else 2
T = R
rng = np.random.default_rng(0)
pages = (keys + R + P) // P + 1
kp = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32)
vp = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32)
qkv = rng.standard_normal((T, (nq + 2 * nkv) * hd)).astype(np.float32)
cos = rng.standard_normal((T, hd // 2)).astype(np.float32); sin = cos.copy()
spans = np.array([[0, R]], np.int64); starts = np.array([keys], np.int64)
tables = np.arange(pages, dtype=np.int64)[None]; page_rows = np.array([P], np.int64)
owner = ac.owners(spans, T)
groups = ac.row_groups(spans)
out = np.zeros((T, nq, hd), np.float32)
sc_scale = np.float32(0.125)

@njit(nogil=True)
def old_(n, out, kp, vp, qkv):
    for _ in range(n):
        for j in range(groups.shape[0] * nkv):
            ac._group_job(j, groups, owner, qkv, nq, nkv, hd, cos, sin, kp, vp, spans, starts, tables, page_rows, sc_scale, out)
def old(n): old_(n, out, kp, vp, qkv)

width = int(ac.phased_width(spans, starts))
sc = np.zeros((nkv, T, nq // nkv, width), np.float32)
qr = np.zeros((nkv, T, nq // nkv, hd), np.float32)
pj = ac.phased_jobs(spans, starts, page_rows, nkv)
out2 = np.zeros((T, nq, hd), np.float32)

@njit(nogil=True)
def rot_(n, qkv, qr):
    for _ in range(n):
        for j in range(T * nkv):
            ac.rotate_q(j // nkv, j % nkv, qkv, nq, nkv, hd, cos, sin, qr)
def rot(n): rot_(n, qkv, qr)
@njit(nogil=True)
def scores_(n, qr, kp, sc):
    for _ in range(n):
        for j in range(pj.shape[0]):
            ac.scores_job(j, pj, qr, kp, spans, starts, tables, page_rows, sc)
def scores(n): scores_(n, qr, kp, sc)
@njit(nogil=True)
def soft_(n, sc):
    for _ in range(n):
        for j in range(T * nq):
            ac.softmax_job(j, owner, nq, spans, starts, sc_scale, sc)
def soft(n): soft_(n, sc)
@njit(nogil=True)
def vals_(n, sc, vp, out2):
    for _ in range(n):
        for j in range(nkv * hd // 32):
            ac.values_job(j, nkv, sc, vp, spans, starts, tables, page_rows, out2)
def vals(n): vals_(n, sc, vp, out2)
for f in (old, rot, scores, soft, vals):
    f(1)
print("equal", out.tobytes() == out2.tobytes())
for f in (old, rot, scores, soft, vals):
    ts = []
    for _ in range(7):
        t0 = time.perf_counter(); f(30); ts.append((time.perf_counter() - t0) / 30 * 1e6)
    print(f.__name__ if hasattr(f, '__name__') else f, "us/layer", round(min(ts), 1))
