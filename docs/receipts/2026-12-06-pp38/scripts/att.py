import server, time, sys
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import attention_cpu as A, halves
rng = np.random.default_rng(0)
def run(nq, KV, hd=128, n=512, reps=3):
    P = 16; pages = n // P
    k_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    v_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    table = np.arange(pages, dtype=np.int64)
    q = (rng.standard_normal((n, nq, hd)) * 0.3).astype(np.float32)
    out = np.empty((n, nq, hd), np.float32)
    start = 0; scale = np.float32(0.0883883)
    W = 2
    for r in range(reps):
        T = {}
        def tm(name, fn):
            c = time.process_time(); t = time.perf_counter(); fn(); T[name] = (time.perf_counter() - t, time.process_time() - c)
        last = start + n
        Kt = np.empty((KV, hd, (last + 15) // 16 * 16), np.float32)
        V = np.empty((KV, last, hd), np.float32)
        tm("gather", lambda: halves.pair(lambda a, b: A.ref_gather_span(k_pool, v_pool, table, P, last, Kt, V, a, b), last // 32 * 16, last))
        offs = A.ref_offsets(start, n, nq)
        S = A._scratch(int(offs[-1]))
        tm("scores", lambda: A.ref_scores(q, Kt, start, scale, offs, S, W))
        def ex(a, b): np.exp(S[a:b], out=S[a:b])
        tm("exp", lambda: halves.pair(ex, S.shape[0] // 2, S.shape[0]))
        tm("values", lambda: A.ref_values(V, start, offs, S, out, W))
        tm("ref_chunk", lambda: A.ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, pair=halves.pair))
        print(f"nq={nq} KV={KV}: " + "  ".join(f"{k} {v[0]*1e3:.2f} ms ({v[1]/v[0]:.2f})" for k, v in T.items()), flush=True)
import os
if os.environ.get("SHAPE", "both") != "glm": run(32, 4)
run(96, 8)
