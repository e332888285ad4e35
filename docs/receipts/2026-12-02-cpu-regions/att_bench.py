import sys, time, numpy as np
sys.path.insert(0, '/work/main')
from kernels import attention_cpu as A
nq, nkv, hd, P = 9, 3, 64, 16
rng = np.random.default_rng(0)
for L in (32, 128, 512):
    pages = -(-L // P) + 1
    K = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32)
    V = rng.standard_normal((pages, P, nkv, hd)).astype(np.float32)
    qkv = rng.standard_normal((1, (nq + 2 * nkv) * hd)).astype(np.float32)
    inv = (1.0 / 10000 ** (np.arange(0, hd, 2) / hd)).astype(np.float32)
    class C: pass
    c = C(); c.table = list(range(pages)); c.start = L - 1; c.page_rows = P
    cos, sin, spans, starts, tables, page_rows = A.plan([c], [(0, 1)], [L - 1], inv)
    owner = A.owners(spans, 1)
    out = np.zeros((1, nq, hd), np.float32)
    A._job(0, owner, qkv, nq, nkv, hd, cos, sin, K, V, spans, starts, tables, page_rows, np.float32(0.125), out)
    best = 1e9
    for _ in range(2000):
        t = time.perf_counter()
        A._job(0, owner, qkv, nq, nkv, hd, cos, sin, K, V, spans, starts, tables, page_rows, np.float32(0.125), out)
        best = min(best, time.perf_counter() - t)
    print(f"L {L}: one (row, kv head) job {best*1e6:.2f} us ({best*1e9/L/3:.1f} ns a key a head), 90 a round = {best*90*1e3:.3f} ms")
