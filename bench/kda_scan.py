"""The Kimi Delta Attention scan on the CPU (kernels/kda_cpu.py) side by side with the Gated
DeltaNet scan (kernels/gdn_cpu.py) at the same state size: time a position of one layer,
prefill-sized chunks and one position a call, the two kernels alternating rep by rep (the
machine's load moves; the ratio is the number to read).

    PYTHONPATH=$PWD python3 bench/kda_scan.py [--shape kimi-linear-48b-a3b] [--gdn-shape
        qwen3-next-80b-a3b] [--tp 1] [--n 128] [--reps 3]

Prints ms a position for each and their ratio, and whether a chunk and one position a call
leave the same KDA state bytes.
"""
from __future__ import annotations

import argparse
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="kimi-linear-48b-a3b")
    ap.add_argument("--gdn-shape", default="qwen3-next-80b-a3b")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--n", type=int, default=128)
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    from kernels import gdn_cpu, kda_cpu
    from server.shapes.spec import shape
    s, g = shape(a.shape), shape(a.gdn_shape)
    rng = np.random.default_rng(0)
    f = lambda *sh: rng.standard_normal(sh).astype(np.float32)
    H, D, K = s.lin_k_heads // a.tp, s.lin_k_dim, s.conv_kernel
    C = 3 * H * D
    kx = dict(mix=f(a.n, C), f=f(a.n, H * D), b=f(a.n, H), gate=f(a.n, H * D),
              conv_w=f(C, K) * np.float32(0.5),
              A_log=np.log(rng.uniform(1, 16, H)).astype(np.float32),
              dt_bias=(f(H * D) * np.float32(0.5) - np.float32(4)), norm_w=np.ones(D, np.float32))
    nk, nv, dk, dv = g.lin_k_heads // a.tp, g.lin_v_heads // a.tp, g.lin_k_dim, g.lin_v_dim
    Cg = 2 * nk * dk + nv * dv
    gx = dict(mix=f(a.n, Cg), z=f(a.n, nv * dv), b=f(a.n, nv), a=f(a.n, nv),
              conv_w=f(Cg, K) * np.float32(0.5), A_log=np.zeros(nv, np.float32),
              dt_bias=np.ones(nv, np.float32), norm_w=np.ones(dv, np.float32))

    def run_kda(step):
        state, window = np.zeros((H, D, D), np.float32), np.zeros((K - 1, C), np.float32)
        t = time.perf_counter()
        for i in range(0, a.n, step):
            j = min(i + step, a.n)
            kda_cpu.chunk(kx["mix"][i:j], kx["f"][i:j], kx["b"][i:j], kx["gate"][i:j],
                          kx["conv_w"], kx["A_log"], kx["dt_bias"], kx["norm_w"], 1e-5, window,
                          state, s.lin_lower_bound)
        return (time.perf_counter() - t) / a.n * 1e3, state

    def run_gdn(step):
        state, window = np.zeros((nv, dk, dv), np.float32), np.zeros((K - 1, Cg), np.float32)
        t = time.perf_counter()
        for i in range(0, a.n, step):
            j = min(i + step, a.n)
            gdn_cpu.chunk(gx["mix"][i:j], gx["z"][i:j], gx["b"][i:j], gx["a"][i:j],
                          gx["conv_w"], gx["A_log"], gx["dt_bias"], gx["norm_w"], 1e-6, window,
                          state, nk)
        return (time.perf_counter() - t) / a.n * 1e3, state

    run_kda(4), run_gdn(4)                                   # compile
    print(f"KDA {a.shape} TP={a.tp}: {H} heads of {D}x{D}, conv {C} channels; GDN "
          f"{a.gdn_shape}: {nk} k / {nv} v heads of {dk}x{dv}")
    for step in (a.n, 1):
        ks, gs = [], []
        for _ in range(a.reps):                              # alternating, rep by rep
            ks.append(run_kda(step)[0])
            gs.append(run_gdn(step)[0])
        kb, gb = min(ks), min(gs)
        print(f"  {'chunk of %d' % a.n if step > 1 else 'one a call'}: KDA {kb:.3f} ms a "
              f"position, GDN {gb:.3f} ms; KDA / GDN {kb / gb:.2f}")
    print(f"  KDA state bytes equal (chunk of {a.n} vs one a call): "
          f"{run_kda(a.n)[1].tobytes() == run_kda(1)[1].tobytes()}")


if __name__ == "__main__":
    main()
