import numpy as np, time, sys
sys.argv = sys.argv[:1]
import kernels; kernels.init()
from kernels import attention, attention_cpu as A, halves
def chunk_attend(q, k_pool, v_pool, table, P, start, scale):
    out = np.empty(q.shape, np.float32)
    A.ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, halves.pair)
    return out
import numba
rng = np.random.default_rng(0)
nq, KV, hd, n, P = 32, 4, 128, 512, 16
pages = n // P
k_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
v_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
table = np.arange(pages)
q = (rng.standard_normal((n, nq, hd)) * 0.5).astype(np.float32)
chunk_attend(q, k_pool, v_pool, table, P, 0, 0.088)
def halves_ref():
    out = np.empty_like(q)
    keys = np.cumsum(np.arange(1, n + 1)); cut = int(np.searchsorted(keys, keys[-1] // 2)) + 1
    def run(i, j): out[i:j] = attention.ref(q[i:j], k_pool, v_pool, table, P, i, 0.088)
    halves.pair(run, cut, n)
    return out
halves_ref()
for name, f in [("numpy halves", halves_ref), ("new", lambda: chunk_attend(q, k_pool, v_pool, table, P, 0, 0.088))] * 2:
    t = time.perf_counter(); c = time.process_time()
    for _ in range(3): f()
    print(name, "%.1f ms wall, %.2f cores" % ((time.perf_counter() - t) / 3 * 1e3, (time.process_time() - c) / (time.perf_counter() - t)))
# stage split
last = n; Kt = np.empty((KV, hd, (last+15)//16*16), np.float32); V = np.empty((KV, last, hd), np.float32)
offs = A.ref_offsets(0, n, nq); S = np.empty(offs[-1], np.float32); out = np.empty_like(q)
for nm, f in [("gather", lambda: A.ref_gather(k_pool, v_pool, table, P, last, Kt, V)), ("scores", lambda: A.ref_scores(q, Kt, 0, np.float32(0.088), offs, S, 2)), ("exp", lambda: np.exp(S, out=S)), ("values", lambda: A.ref_values(V, 0, offs, S, out, 2))]:
    t = time.perf_counter()
    for _ in range(3): f()
    print(nm, "%.2f ms" % ((time.perf_counter() - t) / 3 * 1e3))
