"""The new MoE op with the router's F32 product as a crew round (ROUTER_SERIAL_BYTES 0) against
on the calling thread alone (the same kernel, the same bytes), alternating in one process on a
GGUF's real layers at decode; then parts.py's breakdown.

    PYTHONPATH=<tree> python router_ab.py FILE.gguf [ROUNDS] [CALLS]     (under the bench lock)
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import server  # noqa: F401,I001
import numpy as np


def main():
    path = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    from bench.moe_cpu import Foldserve
    f = Foldserve(path, 2)                     # kernels.init() on the way
    from kernels import moe_cpu
    m = f.eng.model
    ops, w = m.ops, m.w
    layers = [L for L in w.layers if getattr(L, "router", None) is not None]
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, f.spec.d_model)).astype(np.float32) for _ in range(calls)]

    def run(serial):
        moe_cpu.ROUTER_SERIAL_BYTES = (1 << 40) if serial else 0
        t = time.perf_counter()
        for x in xs:
            for L in layers:
                ops.moe(x, L.router, getattr(L, "router_bias", None), L.experts_gu,
                        L.experts_down, w.expert_ff, m.routing)
        return (time.perf_counter() - t) / (len(xs) * len(layers))
    run(False), run(True)
    got = {False: [], True: []}
    for r in range(rounds):
        for s in (False, True):
            got[s].append(run(s))
        print(f"round {r + 1}: crew {got[False][-1] * 1e3:.3f} ms, caller alone "
              f"{got[True][-1] * 1e3:.3f} ms a layer call", flush=True)
    print(f"median crew {st.median(got[False]) * 1e3:.3f} ms, caller alone "
          f"{st.median(got[True]) * 1e3:.3f} ms; load {open('/proc/loadavg').read().strip()}")
    moe_cpu.ROUTER_SERIAL_BYTES = 0


if __name__ == "__main__":
    main()
