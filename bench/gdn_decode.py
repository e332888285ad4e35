"""A Gated DeltaNet decode step's recurrent op at a real shape, as the engine calls it: the
"numpy" ops backend's gdn_round (kernels/ops_cpu.py) over one stream's single position, L
layers a step, each layer's state and window evicted from the caches first (a sweep through
a buffer larger than L3, as a decode step's weights evict them), and its add_norm on a d-wide
row. Prints the median and quartiles of each over many steps (robust to a shared machine's
swings), so two trees can be compared in alternating fresh processes.

    PYTHONPATH=$PWD python -m bench.gdn_decode [--shape qwen3-next-80b-a3b] [--layers 3] [--steps 200]
"""
from __future__ import annotations

import argparse
import time

import numpy as np


class _Chunk:
    def __init__(self, slot):
        self.slot, self.snap = slot, ()


class _Rows:
    def __init__(self):
        self.spans, self.chunks = [(0, 1)], [_Chunk(0)]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3-next-80b-a3b")
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--evict-mb", type=int, default=64)
    a = ap.parse_args()
    import kernels
    kernels.init()
    from kernels.ops_cpu import Ops
    from server.shapes.spec import shape
    s = shape(a.shape)
    nk, nv, dk, dv, K = s.lin_k_heads, s.lin_v_heads, s.lin_k_dim, s.lin_v_dim, s.conv_kernel
    C = 2 * nk * dk + nv * dv
    rng = np.random.default_rng(0)
    f = lambda *sh: rng.standard_normal(sh).astype(np.float32)
    ops = Ops()
    layers = [dict(conv_w=f(C, K) * np.float32(0.5), A_log=f(nv) * np.float32(0.3), dt_bias=f(nv),
                   norm_w=f(dv), fixed=(f(1, nv, dk, dv) * np.float32(0.1), f(1, K - 1, C)))
              for _ in range(a.layers)]
    y = f(1, C + nv * dv + 2 * nv)
    qkvz, ba = y[:, :C + nv * dv], y[:, C + nv * dv:]
    h, out, w = f(1, s.d_model), f(1, s.d_model), f(s.d_model)
    sweep = np.ones(a.evict_mb << 18, np.float32)
    rows = _Rows()
    t_gdn, t_norm = [], []
    for step in range(a.steps + 5):
        g = nrm = 0.0
        for L in layers:
            sweep += np.float32(1.0)                     # the caches hold other bytes now
            t = time.perf_counter()
            ops.gdn_round(qkvz, ba, L["conv_w"], L["A_log"], L["dt_bias"], L["norm_w"], 1e-6, nk,
                          L["fixed"], rows)
            g += time.perf_counter() - t
            t = time.perf_counter()
            ops.add_norm(out, h, w, 1e-6)
            nrm += time.perf_counter() - t
        if step >= 5:
            t_gdn.append(g * 1e3)
            t_norm.append(nrm * 1e3)
    q = lambda v: np.percentile(v, [25, 50, 75])
    print(f"{a.shape}: {nk} k heads, {nv} v heads of {dk}x{dv}, {a.layers} layers a step")
    print("gdn_round a step ms (q25 median q75): " + " ".join(f"{x:.3f}" for x in q(t_gdn)))
    print("add_norm a step ms (q25 median q75):  " + " ".join(f"{x:.3f}" for x in q(t_norm)))
    import os
    print("load average", os.getloadavg())


if __name__ == "__main__":
    main()
