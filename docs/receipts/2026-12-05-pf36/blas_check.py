import numpy as np, sys
from numba import njit
@njit(fastmath={"contract"})
def mm(a, b, out):
    # a [B, M, K], b [B, K, N]: out[b,m,n] = sequential fma over k from 0
    for bb in range(a.shape[0]):
        for m in range(a.shape[1]):
            for n in range(b.shape[2]):
                acc = np.float32(0.0)
                for k in range(a.shape[2]):
                    acc += a[bb, m, k] * b[bb, k, n]
                out[bb, m, n] = acc
rng = np.random.default_rng(0)
G = int(sys.argv[1]); KV = int(sys.argv[2]); hd = 128
bad = []
Ls = list(range(1, 70)) + list(range(70, 4200, 37)) + [511, 512, 513, 1024, 2048, 4096]
for L in Ls:
    q = rng.standard_normal((KV, G, hd)).astype(np.float32)
    K = rng.standard_normal((KV, hd, L)).astype(np.float32)
    s = np.matmul(q, K)
    o = np.empty_like(s); mm(q, K, o)
    w = rng.random((KV, G, L)).astype(np.float32)
    V = rng.standard_normal((KV, L, hd)).astype(np.float32)
    y = np.matmul(w, V)
    o2 = np.empty_like(y); mm(w, V, o2)
    a = np.array_equal(s.view(np.int32), o.view(np.int32)); b = np.array_equal(y.view(np.int32), o2.view(np.int32))
    if not (a and b): bad.append((L, a, b, float(np.abs(y - o2).max())))
print("G", G, "KV", KV, "bad", len(bad), "of", len(Ls), bad[:10])
