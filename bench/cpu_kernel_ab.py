"""Two versions of kernels/blocks_vec.py side by side on the default model's matrices, as a
decode step meets them (every layer's matrix in turn, one token), interleaved call set by call
set so both see the same machine: A = a file given (--before, e.g. the previous commit's
blocks_vec.py, `git show REV:kernels/blocks_vec.py > /tmp/before.py`), B = this checkout's.
Checks that both give the same bytes, then prints per stage the median ms a step of each
(thread CPU clock at --threads 1; wall clock too), and B / A.

  python3 bench/cpu_kernel_ab.py --before /tmp/before.py [--threads 1] [--reps 30] [--rows 1]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.cpu_stage_time import matrices_by_role  # noqa: E402
from server.engine.build import open_model  # noqa: E402


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod                 # numba's cache pickles the module by name
    spec.loader.exec_module(mod)
    return mod


def caller(mod, kind, datas, x):
    """A function running `mod`'s kernel over every matrix once (its own buffers)."""
    xs = np.empty((x.shape[0], x.shape[1] // 32), np.float32)
    mod.block_sums(x, xs)
    out = np.empty((x.shape[0], datas[0].shape[0]), np.float32)
    k = mod.KERNELS[kind]
    extra = [(mod._scales_of(kind, d),) if hasattr(mod, "_scales_of") else () for d in datas]

    def run():
        for d, e in zip(datas, extra):
            k(x, xs, d, *e, out)
        return out
    nbytes = sum(d.nbytes for d in datas) + sum(e[0].nbytes for e in extra if e)
    return run, nbytes


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--cached", action="store_true",
                    help="layer 0's matrix 30 times (in cache: the compute alone)")
    a = ap.parse_args()
    import numba
    numba.set_num_threads(a.threads)
    A = load(a.before, "blocks_vec_before")
    import kernels
    kernels.init()                 # before the numba kernels (kernels/__init__.py)
    from kernels import blocks_vec as B
    w = open_model(None, progress=False).engine.weights
    roles = matrices_by_role(w)
    rng = np.random.default_rng(0)
    res = {}
    for role, mats in roles.items():
        kind = mats[0].kind
        x = rng.standard_normal((a.rows, mats[0].cols)).astype(np.float32)
        datas = [mats[0].data] * len(mats) if a.cached else [m.data for m in mats]
        ra, na = caller(A, kind, datas, x)
        rb, nb = caller(B, kind, datas, x)
        assert ra().tobytes() == rb().tobytes(), f"{role}: A and B differ"
        t = {"A": [], "B": [], "Aw": [], "Bw": []}
        for rep in range(a.reps):
            for name, fn in (("A", ra), ("B", rb)) if rep % 2 == 0 else (("B", rb), ("A", ra)):
                c, wt = time.thread_time(), time.perf_counter()
                fn()
                t[name].append(time.thread_time() - c)
                t[name + "w"].append(time.perf_counter() - wt)
        med = {k: float(np.median(v)) * 1e3 for k, v in t.items()}
        res[role] = {"kind": kind, "A_ms": med["A"], "B_ms": med["B"], "A_wall_ms": med["Aw"],
                     "B_wall_ms": med["Bw"], "A_MB": na / 1e6, "B_MB": nb / 1e6,
                     "B_over_A": float(np.median(np.array(t["B"]) / np.array(t["A"])))}
    clock = "thread CPU" if a.threads == 1 else "wall"
    key = "" if a.threads == 1 else "_wall"
    print(f"threads {a.threads}, rows {a.rows}, {a.reps} interleaved reps, medians ({clock} clock), load "
          f"{os.getloadavg()[0]:.1f}; bytes equal A == B")
    for role, r in res.items():
        print(f"  {role:8s} {r['kind']}  A {r['A' + key + '_ms']:7.3f} ms ({r['A_MB']:5.1f} MB)  "
              f"B {r['B' + key + '_ms']:7.3f} ms ({r['B_MB']:5.1f} MB)  B/A {r['B' + key + '_ms'] / r['A' + key + '_ms']:.3f}")
    ta = sum(r["A" + key + "_ms"] for r in res.values())
    tb = sum(r["B" + key + "_ms"] for r in res.values())
    print(f"  all      A {ta:.2f} ms  B {tb:.2f} ms  B/A {tb / ta:.3f}")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps({"commit": commit, "before": a.before, "threads": a.threads, "rows": a.rows, "stages": res}))


if __name__ == "__main__":
    main()
