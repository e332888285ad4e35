"""The base form's scale-and-max loop (its scalar code, inlined here), its sum + divide, and
numpy's exp loop, ns an element on [8, 512] scores: run in a tree on PYTHONPATH."""
import time, numpy as np, kernels; kernels.init()
from numba import njit
from kernels import attention_cpu as A
@njit(cache=False, boundscheck=False)
def maxpass(S, G, Lp, L, scale, reps):
    mx = np.empty(16, np.float32)
    for r in range(reps):
        s = S.reshape(G, Lp)
        L16 = L // 16 * 16
        for g in range(G):
            sg = s[g]
            for l in range(16):
                mx[l] = -np.inf
            for j0 in range(0, L16, 16):
                for l in range(16):
                    v = sg[j0 + l] * scale
                    sg[j0 + l] = v
                    mx[l] = max(mx[l], v)
            m = np.float32(-np.inf)
            for l in range(16):
                m = max(m, mx[l])
            for j in range(L16, L):
                v = sg[j] * scale
                sg[j] = v
                m = max(m, v)
            for j in range(L):
                sg[j] = sg[j] - m
@njit(cache=False, boundscheck=False)
def sumdiv(S, G, Lp, L, reps):
    for r in range(reps):
        s = S.reshape(G, Lp)
        for g in range(G):
            t = A._np_sum(s[g], L)
            for j in range(L):
                s[g, j] = s[g, j] / t
G, L = 8, 512
S = np.random.default_rng(0).random(G * L).astype(np.float32) * 0.5 + 0.5
maxpass(S, G, L, L, np.float32(1.0), 1); sumdiv(S, G, L, L, 1)
reps = 2000
t = time.perf_counter(); maxpass(S, G, L, L, np.float32(1.0), reps); dt = time.perf_counter() - t
print(f"max pass {dt / (reps * G * L) * 1e9:.3f} ns/elt")
t = time.perf_counter(); sumdiv(S, G, L, L, reps); dt = time.perf_counter() - t
print(f"sum+div {dt / (reps * G * L) * 1e9:.3f} ns/elt")
x = S.copy(); ex = A.np_exp_loop()
t = time.perf_counter()
for r in range(reps): A._exp_inplace(ex, x, x.shape[0]); x[:] = S
dt = time.perf_counter() - t
print(f"exp(+copy) {dt / (reps * G * L) * 1e9:.3f} ns/elt")
