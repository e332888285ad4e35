import numpy as np, time, sys
sys.path.insert(0, '/tmp/attx')
from att_old import _attend_serial as old
from kernels.attention_cpu import _attend_serial as new
rng = np.random.default_rng(0)
nq, nkv, hd, P = 9, 3, 64, 16
for L in (1, 17, 64, 128, 512, 1700):
    pages = L // P + 3
    K = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32); V = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32)
    qkv = rng.standard_normal((1, (nq + 2*nkv)*hd)).astype(np.float32)
    cos = rng.random((1, hd//2)).astype(np.float32); sin = rng.random((1, hd//2)).astype(np.float32)
    spans = np.array([[0, 1]], np.int64); starts = np.array([L - 1], np.int64)
    tables = rng.permutation(pages).astype(np.int64)[None, :]; pr = np.array([P], np.int64)
    res = []
    for f in (old, new):
        out = np.empty((1, nq, hd), np.float32); K2 = K.copy(); V2 = V.copy()
        g = lambda: f(qkv, nq, nkv, hd, cos, sin, K2, V2, spans, starts, tables, pr, np.float32(0.125), out)
        g()
        n = max(200, 20000 // L); t = time.perf_counter()
        for _ in range(n): g()
        dt = (time.perf_counter() - t) / n
        res.append((dt, out.tobytes(), K2.tobytes()))
    print(f"L {L}: old {res[0][0]*1e6:.1f} us new {res[1][0]*1e6:.1f} us  ({res[0][0]*1e9/(L*nq):.1f} -> {res[1][0]*1e9/(L*nq):.1f} ns/key-head) equal {res[0][1]==res[1][1] and res[0][2]==res[1][2]}")
