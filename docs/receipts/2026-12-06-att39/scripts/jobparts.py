"""One thread: a 512-row chunk's jobs (Qwen3 32/4 and GLM 96/8 heads, hd 128) part by part:
scores (_job_scores), exp (numpy's loop), values (_job_values); each part over every job,
ms (medians of REPS), GMAC/s of the causal products (keys rounded to 16)."""
import os, time
import numpy as np
import kernels; kernels.init()
from numba import njit
from kernels import attention_cpu as A
from kernels.vec_ir import call_f_f_loop
REPS = int(os.environ.get("REPS", "5"))

@njit(cache=False)
def offsets(t0, t1, G, start):
    offs = np.empty(A.REF_GROUP + 1, np.int64)
    offs[0] = 0
    for i in range(t0, t1):
        offs[i - t0 + 1] = offs[i - t0] + G * ((start + i + 16) // 16 * 16)
    return offs

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
            call_f_f_loop(ex, S, offs[t1 - t0])
        else:
            A._job_values(t0, t1, V[h], start, S, offs, oj)

def run(nq, KV, hd=128, n=512):
    rng = np.random.default_rng(0)
    G = nq // KV
    w16 = (n + 15) // 16
    Kt = rng.standard_normal((KV, (n + 31) // 32, hd, 32)).astype(np.float32)
    V = rng.standard_normal((KV, n, hd)).astype(np.float32)
    q = (rng.standard_normal((n, nq, hd)) * 0.3).astype(np.float32)
    out = np.empty((n, nq, hd), np.float32)
    S = np.zeros(A.REF_GROUP * G * w16 * 16, np.float32)
    ex = A.np_exp_loop()
    mac = sum((i + 16) // 16 * 16 for i in range(n)) * nq * hd
    msg = []
    for which, name in enumerate(("scores", "exp", "values")):
        part(which, q, Kt, V, 0, np.float32(0.088), ex, S, out)
        ts = []
        for r in range(REPS):
            t = time.perf_counter(); part(which, q, Kt, V, 0, np.float32(0.088), ex, S, out); ts.append(time.perf_counter() - t)
        ts.sort()
        msg.append(f"{name} {ts[len(ts)//2]*1e3:.2f} ms ({mac / ts[len(ts)//2] / 1e9:.0f} GMAC/s)")
    print(f"nq={nq} KV={KV}, one thread: " + "  ".join(msg), flush=True)
if os.environ.get("SHAPE", "both") != "glm": run(32, 4)
if os.environ.get("SHAPE", "both") != "qwen": run(96, 8)
