"""The Gated DeltaNet scan on the CPU (kernels/gdn_cpu.py): time a position of one layer at a
real shape, prefill-sized chunks against one position a call, and the numpy definition's.

    PYTHONPATH=$PWD python3 bench/gdn_scan.py [--shape qwen3-next-80b-a3b] [--tp 1] [--n 256]

Prints ms a position for each form and the state bytes a stream (the fixed part of a layer).
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-next-80b-a3b")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--n", type=int, default=256)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    import kernels
    kernels.init()                 # before the numba kernels (kernels/__init__.py)
    from kernels import gdn, gdn_cpu
    from server.shapes.spec import shape
    s = shape(a.shape)
    nk, nv = s.lin_k_heads // a.tp, s.lin_v_heads // a.tp
    dk, dv, K = s.lin_k_dim, s.lin_v_dim, s.conv_kernel
    C = 2 * nk * dk + nv * dv
    rng = np.random.default_rng(0)
    f = lambda *sh: rng.standard_normal(sh).astype(np.float32)
    x = dict(mix=f(a.n, C), z=f(a.n, nv * dv), b=f(a.n, nv), a=f(a.n, nv),
             conv_w=f(C, K) * np.float32(0.5), A_log=np.zeros(nv, np.float32),
             dt_bias=np.ones(nv, np.float32), norm_w=np.ones(dv, np.float32))

    def run(fn, step, n):
        state = np.zeros((nv, dk, dv), np.float32)
        window = np.zeros((K - 1, C), np.float32)
        t = time.perf_counter()
        for i in range(0, n, step):
            j = min(i + step, n)
            fn(x["mix"][i:j], x["z"][i:j], x["b"][i:j], x["a"][i:j], x["conv_w"], x["A_log"],
               x["dt_bias"], x["norm_w"], 1e-6, window, state, nk)
        return (time.perf_counter() - t) / n * 1e3, state

    run(gdn_cpu.chunk, a.n, 4)                       # compile
    best = lambda fn, step, n: min(run(fn, step, n)[0] for _ in range(a.reps))
    pre = best(gdn_cpu.chunk, a.n, a.n)
    dec = best(gdn_cpu.chunk, 1, a.n)
    ref = run(gdn.chunk, a.n, min(a.n, 16))[0]
    sa, sb = run(gdn_cpu.chunk, a.n, a.n)[1], run(gdn_cpu.chunk, 1, a.n)[1]
    print(f"{a.shape} TP={a.tp}: {nk} k heads, {nv} v heads of {dk}x{dv}, conv {C} channels")
    print(f"  state + window a stream and layer: {(nv * dk * dv + (K - 1) * C) * 4 / 2**20:.2f} MiB")
    print(f"  numba, chunk of {a.n}: {pre:.3f} ms a position;  one position a call: {dec:.3f} ms")
    print(f"  numpy definition: {ref:.3f} ms a position")
    print(f"  state bytes equal (chunk of {a.n} vs one a call): {sa.tobytes() == sb.tobytes()}")


if __name__ == "__main__":
    main()
