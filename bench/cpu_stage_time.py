"""Each stage of a decode step (one token) as the step meets it: every layer's matrix in turn
(so the weights come from memory, not from a cache warmed by repeating one matrix), timed
per call with the thread's CPU clock (at --threads 1 that is the work itself, robust to other
processes on the machine) and the wall clock. Prints ms a step per stage and the bytes read.

  python3 bench/cpu_stage_time.py [--threads 1] [--reps 20]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402


def matrices_by_role(w) -> dict:
    """The model's matrices by their role in a layer (every layer's), and the head."""
    return {"qkv": [L.wqkv for L in w.layers], "o": [L.wo for L in w.layers],
            "gate_up": [L.wgu for L in w.layers], "down": [L.wdown for L in w.layers],
            "head": [w.lm_head]}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rows", type=int, default=1)
    a = ap.parse_args()
    import numba
    numba.set_num_threads(a.threads)
    import kernels
    kernels.init()                 # before the numba kernels (kernels/__init__.py)
    from kernels import blocks_vec as V
    eng = open_model(None, progress=False).engine
    w = eng.weights
    roles = matrices_by_role(w)
    rng = np.random.default_rng(0)
    res = {}
    for role, mats in roles.items():
        x = rng.standard_normal((a.rows, mats[0].cols)).astype(np.float32)
        xs = np.empty((a.rows, mats[0].cols // 32), np.float32)
        V.block_sums(x, xs)
        out = np.empty((a.rows, mats[0].rows), np.float32)
        k = V.KERNELS[mats[0].kind]
        args = [(m.data,) + ((V._scales_of(m.kind, m.data),) if hasattr(V, '_scales_of') else ()) for m in mats]
        k(x, xs, *args[0], out)
        cpu, wall = [], []
        for rep in range(a.reps):
            c, t = time.thread_time(), time.perf_counter()
            for ar in args:
                k(x, xs, *ar, out)
            cpu.append(time.thread_time() - c)
            wall.append(time.perf_counter() - t)
        nbytes = sum(m.data.nbytes for m in mats) + sum(ar[1].nbytes for ar in args if len(ar) > 1)
        res[role] = {"cpu_ms": float(np.median(cpu)) * 1e3, "wall_ms": float(np.median(wall)) * 1e3,
                     "wall_min_ms": float(np.min(wall)) * 1e3, "MB": nbytes / 1e6, "kind": mats[0].kind}
    tot = sum(r["cpu_ms"] for r in res.values())
    for role, r in res.items():
        print(f"{role:8s} {r['kind']} cpu {r['cpu_ms']:7.3f} ms  wall {r['wall_ms']:7.3f} (min {r['wall_min_ms']:7.3f}) ms"
              f"  {r['MB']:6.1f} MB  {r['MB'] / r['wall_min_ms']:5.1f} GB/s at min")
    print(f"matmuls a step: cpu {tot:.2f} ms, wall-min {sum(r['wall_min_ms'] for r in res.values()):.2f} ms "
          f"(threads {a.threads}, rows {a.rows}, load {os.getloadavg()[0]:.1f})")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps({"commit": commit, "threads": a.threads, "rows": a.rows, "stages": res}))


if __name__ == "__main__":
    main()
