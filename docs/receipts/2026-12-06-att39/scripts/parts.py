"""ref_chunk's parts (gather, scores, exp, values) and the whole, on random rows at Qwen3's
(32 q / 4 kv) and GLM's (96 / 8) heads, hd 128, 512 rows from position 0, in the tree on
PYTHONPATH; medians of REPS (ms, cores)."""
import os, time, hashlib, inspect
import numpy as np
import kernels; kernels.init()
import numba; numba.set_num_threads(2)
from kernels import attention_cpu as A, halves
REPS = int(os.environ.get("REPS", "7"))

def run(nq, KV, hd=128, n=512):
    rng = np.random.default_rng(0)
    P = 16; pages = n // P
    k_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    v_pool = rng.standard_normal((pages, P, KV, hd)).astype(np.float32)
    table = np.arange(pages, dtype=np.int64)
    q = (rng.standard_normal((n, nq, hd)) * 0.3).astype(np.float32)
    out = np.empty((n, nq, hd), np.float32)
    start = 0; scale = np.float32(0.0883883)
    A.ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, pair=halves.pair)
    T = {}
    saved = {}
    for name in os.environ.get("PARTS", "ref_scores,ref_values,ref_softmax").split(","):
        f = getattr(A, name, None)
        if f is None:
            continue
        def wrapped(*a, _f=f, _n=name, **k):
            c = time.process_time(); t = time.perf_counter()
            r = _f(*a, **k)
            T.setdefault(_n, []).append((time.perf_counter() - t, time.process_time() - c))
            return r
        saved[name] = f
        setattr(A, name, wrapped)
    for r in range(REPS):
        c = time.process_time(); t = time.perf_counter()
        A.ref_chunk(q, k_pool, v_pool, table, P, start, scale, out, pair=halves.pair)
        T.setdefault("ref_chunk", []).append((time.perf_counter() - t, time.process_time() - c))
    for name, f in saved.items():
        setattr(A, name, f)
    h = hashlib.sha256(out.tobytes()).hexdigest()[:12]
    msg = []
    for k, v in T.items():
        v.sort()
        w, c = v[len(v) // 2]
        msg.append(f"{k} {v[0][0]*1e3:.2f}/{w*1e3:.2f} ms ({c/w:.2f})")
    print(f"nq={nq} KV={KV}: " + "  ".join(msg) + f"  sha {h}", flush=True)
if os.environ.get("SHAPE", "both") != "glm": run(32, 4)
if os.environ.get("SHAPE", "both") != "qwen": run(96, 8)
