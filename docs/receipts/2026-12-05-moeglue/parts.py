"""The new MoE op's parts on a GGUF's real layers at decode (one row), each timed alone over
the same calls: router product, route+group, gate|up round, swiglu, down round, combine.

    PYTHONPATH=<tree> python parts.py FILE.gguf [CALLS]              (under the bench lock)
"""
from __future__ import annotations

import sys
import time
from collections import defaultdict
from pathlib import Path

import server  # noqa: F401,I001
import numpy as np


def main():
    path = Path(sys.argv[1])
    calls = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    from bench.moe_cpu import Foldserve
    from kernels import swiglu
    f = Foldserve(path, 2)
    m = f.eng.model
    ops, w = m.ops, m.w
    G = ops._moe_cpu
    layers = [L for L in w.layers if getattr(L, "router", None) is not None]
    rng = np.random.default_rng(1)
    acc = defaultdict(float)
    for rep in range(2):
        acc.clear()
        for c in range(calls):
            x = rng.standard_normal((1, f.spec.d_model)).astype(np.float32)
            for L in layers:
                t0 = time.perf_counter()
                lg = G.router_logits(x, L.router)
                t1 = time.perf_counter()
                ids, wts, rows, slots, experts, offs, pos = G.route_group(lg, m.routing, getattr(L, "router_bias", None))
                t2 = time.perf_counter()
                g, u = G.gate_up_halves(x, rows, L.experts_gu.gate, L.experts_gu.up, experts, offs, ops.kq8, ops.q80)
                t3 = time.perf_counter()
                act = swiglu.limited(g, u, 0.0)
                t4 = time.perf_counter()
                yd = G.grouped_matmul(act, L.experts_down, experts, offs, ops.kq8, ops.q80)
                t5 = time.perf_counter()
                G.combine_grouped(yd, pos, wts)
                t6 = time.perf_counter()
                for k, a, b in (("router", t0, t1), ("route_group", t1, t2), ("gate_up", t2, t3),
                                ("swiglu", t3, t4), ("down", t4, t5), ("combine", t5, t6)):
                    acc[k] += b - a
    n = calls * len(layers)
    gu_b = 2 * L.experts_gu.gate.data[0].nbytes * m.routing.k
    dn_b = L.experts_down.data[0].nbytes * m.routing.k
    for k, v in acc.items():
        extra = ""
        if k == "gate_up":
            extra = f"  {gu_b / (v / n) / 1e9:.1f} GB/s ({gu_b / 1e6:.1f} MB)"
        if k == "down":
            extra = f"  {dn_b / (v / n) / 1e9:.1f} GB/s ({dn_b / 1e6:.1f} MB)"
        if k == "router":
            extra = f"  {L.router.data.nbytes / (v / n) / 1e9:.1f} GB/s"
        print(f"{k:12s} {v / n * 1e6:8.1f} us a layer{extra}", flush=True)
    print(f"total {sum(acc.values()) / n * 1e3:.3f} ms a layer; load {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
