"""ref_chunk and its parts on random rows at Qwen3's (32 q / 4 kv) and GLM's (96 / 8) heads,
hd 128, a 512-row chunk from position 0; run in the tree on PYTHONPATH. Prints ms (cores)."""
import os, time
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import attention_cpu as A, halves
rng = np.random.default_rng(0)
REPS = int(os.environ.get("REPS", "5"))

def run(nq, KV, hd=128, n=512):
    P = 16; pages = n // P
    k_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    v_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    table = np.arange(pages, dtype=np.int64)
    q = (rng.standard_normal((n, nq, hd)) * 0.3).astype(np.float32)
    out = np.empty((n, nq, hd), np.float32)
    start = 0; scale = np.float32(0.0883883)
    best = []
    for r in range(REPS):
        c = time.process_time(); t = time.perf_counter()
        A.ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, pair=halves.pair)
        best.append((time.perf_counter() - t, time.process_time() - c))
    best.sort()
    med = best[len(best) // 2]
    print(f"nq={nq} KV={KV}: ref_chunk min {best[0][0]*1e3:.2f} med {med[0]*1e3:.2f} ms ({med[1]/med[0]:.2f} cores)"
          f"  out sha {hash(out.tobytes()) & 0xffffffff:08x}", flush=True)
if os.environ.get("SHAPE", "both") != "glm": run(32, 4)
if os.environ.get("SHAPE", "both") != "qwen": run(96, 8)
