"""One thread, a 512-row chunk's jobs: the full scores / values parts against their chains alone
(chain_cols16, axpy_heads16 in the same loops), numpy's exp, the q / out copies (min / median ms)."""
import os, time
import numpy as np
import kernels; kernels.init()
from numba import njit
from kernels import attention_cpu as A
from kernels.vec_ir import call_f_f_loop, chain_cols16, axpy_heads16

@njit(cache=False)
def offsets(t0, t1, G, start):
    offs = np.empty(A.REF_GROUP + 1, np.int64)
    offs[0] = 0
    for i in range(t0, t1):
        offs[i - t0 + 1] = offs[i - t0] + G * ((start + i + 16) // 16 * 16)
    return offs

@njit(cache=False, boundscheck=False)
def chains(t0, t1, qj, Kb, start, S, offs):
    G = qj.shape[1]
    Lmax = start + t1
    for j0 in range(0, Lmax, 32):
        kb = Kb[j0 // 32]
        for i in range(t0, t1):
            L = start + i + 1
            if L > j0:
                Lp = (L + 15) // 16 * 16
                j1 = min(j0 + 32, Lp)
                s = S[offs[i - t0]:offs[i - t0] + G * Lp].reshape(G, Lp)
                chain_cols16(qj[i - t0], kb[:, :j1 - j0], s[:, j0:j1])

@njit(cache=False, boundscheck=False)
def axpys(t0, t1, Vh, start, S, offs, oj):
    G = oj.shape[1]
    Lmax = start + t1
    for j0 in range(0, Lmax, 32):
        for i in range(t0, t1):
            L = start + i + 1
            if L > j0:
                Lp = (L + 15) // 16 * 16
                j1 = min(L, j0 + 32)
                s = S[offs[i - t0]:offs[i - t0] + G * Lp].reshape(G, Lp)
                axpy_heads16(oj[i - t0], s[:, j0:j1], Vh[j0:j1])

@njit(cache=False)
def part(which, q, Kt, V, start, scale, ex, S, out):
    KV = Kt.shape[0]; G = q.shape[1] // KV; n = q.shape[0]
    for job in range(A._jobs(n, KV)):
        t0 = (job // KV) * A.REF_GROUP; t1 = min(n, t0 + A.REF_GROUP); h = job % KV
        offs = offsets(t0, t1, G, start)
        qj = q[t0:t1, h * G:(h + 1) * G].copy()
        oj = out[t0:t1, h * G:(h + 1) * G].copy()
        if which == 0:
            A._job_scores(t0, t1, qj, Kt[h], start, scale, S, offs)
        elif which == 1:
            chains(t0, t1, qj, Kt[h], start, S, offs)
        elif which == 2:
            call_f_f_loop(ex, S, offs[t1 - t0])
        elif which == 3:
            A._job_values(t0, t1, V[h], start, S, offs, oj)
        elif which == 4:
            axpys(t0, t1, V[h], start, S, offs, oj)
        else:
            pass

def run(nq, KV, hd=128, n=512):
    rng = np.random.default_rng(0)
    G = nq // KV
    Kt = rng.standard_normal((KV, (n + 31) // 32, hd, 32)).astype(np.float32)
    V = rng.standard_normal((KV, n, hd)).astype(np.float32)
    q = (rng.standard_normal((n, nq, hd)) * 0.3).astype(np.float32)
    out = np.empty((n, nq, hd), np.float32)
    S = np.zeros(A.REF_GROUP * G * ((n + 15) // 16) * 16, np.float32) + 0.001
    ex = A.np_exp_loop()
    msg = []
    for which, name in enumerate(("scores", "chains", "exp", "values", "axpys", "copies")):
        part(which, q, Kt, V, 0, np.float32(0.088), ex, S, out)
        ts = []
        for r in range(int(os.environ.get("REPS", "7"))):
            t = time.perf_counter(); part(which, q, Kt, V, 0, np.float32(0.088), ex, S, out); ts.append(time.perf_counter() - t)
        ts.sort()
        msg.append(f"{name} {ts[0]*1e3:.2f}/{ts[len(ts)//2]*1e3:.2f}")
    print(f"nq={nq} KV={KV}, one thread (min/med ms): " + "  ".join(msg), flush=True)
if os.environ.get("SHAPE", "both") != "glm": run(32, 4)
if os.environ.get("SHAPE", "both") != "qwen": run(96, 8)
