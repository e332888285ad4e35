import sys, time, numpy as np
sys.path.insert(0, '/work/main'); sys.path.insert(0, '/tmp/w/exp')
from numba import njit
from kernels import blocks_vec as V
import bv_b as A
PERM = None
def perm_x(x):
    M, K = x.shape
    xb = x.reshape(M, K // 32, 2, 16)
    return np.ascontiguousarray(xb[..., PERM].reshape(M, K))
def make(mod, kind, R):
    t = mod._make_tile(kind, R, 1, True)
    @njit(boundscheck=False, nogil=True)
    def rows(x, xsum, data, out, lo, hi):
        n = lo
        while n + R <= hi:
            r = t(data, n, x, 0, xsum[0])
            for a in range(R):
                out[0, n + a] = r[a]
            n += R
    return rows
rng = np.random.default_rng(0)
kind = sys.argv[1] if len(sys.argv) > 1 else "Q4_1"
K, N = 576, 1536
nbk = K // 32
data = rng.integers(0, 256, (N, nbk * V.BLOCK_BYTES[kind]), dtype=np.uint8)
for b in range(nbk):   # sane f16 scales
    o = b * V.BLOCK_BYTES[kind]
    sc = (rng.standard_normal(N) * 0.01).astype(np.float16).view(np.uint8).reshape(N, 2)
    data[:, o:o+2] = sc
    if kind == "Q4_1":
        data[:, o+2:o+4] = (rng.standard_normal(N) * 0.01).astype(np.float16).view(np.uint8).reshape(N, 2)
x = rng.standard_normal((1, K)).astype(np.float32)
xs = np.empty((1, nbk), np.float32); V.block_sums(x, xs)
xp = x
fo, fa = make(V, kind, 4), make(A, kind, 4)
o1 = np.zeros((1, N), np.float32); o2 = np.zeros((1, N), np.float32)
fo(x, xs, data, o1, 0, N); fa(xp, xs, data, o2, 0, N)
print("equal bytes:", o1.tobytes() == o2.tobytes())
for rep in range(3):
    for name, f, xx, o in (("orig", fo, x, o1), ("perm", fa, xp, o2)):
        best = 1e9
        for _ in range(300):
            t = time.perf_counter(); f(xx, xs, data, o, 0, N); best = min(best, time.perf_counter() - t)
        print(name, f"{N*nbk/best/1e9:.3f} Gblocks/s")
