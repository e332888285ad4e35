"""The MoE op alone on a GGUF's real layers, old against new in one process, alternating:
`old` is Ops.moe's grouped branch as it stood at 1f8397c (copied below, calling the kernels
that are still there), `new` the engine's ops.moe. Every call's outputs compared byte for
byte; times a call, medians over rounds.

    PYTHONPATH=<tree> python op_ab.py FILE.gguf [ROUNDS] [CALLS]     (under the bench lock)
"""
from __future__ import annotations

import statistics as st
import sys
import time
from pathlib import Path

import server  # noqa: F401,I001  (first: OPENBLAS_NUM_THREADS=1, as serve runs)
import numpy as np


def old_moe(self, x, router, router_bias, experts_gu, experts_down, ff, routing):
    """1f8397c's Ops.moe, its grouped branch (no shared expert), verbatim but for names."""
    from kernels import moe as M
    from kernels import swiglu
    logits = self.linear(x, router)
    ids, wts = M.route(logits, routing, router_bias)
    T, k = ids.shape
    y = np.zeros((T, k, x.shape[1]), np.float32)
    groups = M.groups(ids)
    rows = np.concatenate([r for _, r, _ in groups])
    slots = np.concatenate([s for _, _, s in groups])
    experts = np.array([e for e, _, _ in groups], np.int64)
    offs = np.cumsum([0] + [len(r) for _, r, _ in groups])
    gu = self._moe_cpu.gate_up(x[rows], experts_gu.gate, experts_gu.up, experts, offs,
                               self.kq8, self.q80)
    act = swiglu.limited(gu[:, :ff], gu[:, ff:], 0.0)
    y[rows, slots] = self._moe_cpu.grouped_matmul(act, experts_down, experts, offs, self.kq8,
                                                  self.q80)
    return M.combine(y, wts)


def main():
    path = Path(sys.argv[1])
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    calls = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    from bench.moe_cpu import Foldserve
    f = Foldserve(path, 2)
    m = f.eng.model
    ops, w = m.ops, m.w
    layers = [L for L in w.layers if getattr(L, "router", None) is not None]
    d = f.spec.d_model
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((1, d)).astype(np.float32) for _ in range(calls)]
    router_t = {"old": [], "new": []}
    t_old, t_new, same, total = [], [], 0, 0

    def run(fn):
        outs = []
        t = time.perf_counter()
        for x in xs:
            for L in layers:
                outs.append(fn(x, L))
        return (time.perf_counter() - t) / (len(xs) * len(layers)), outs

    def old(x, L):
        return old_moe(ops, x, L.router, getattr(L, "router_bias", None), L.experts_gu,
                       L.experts_down, w.expert_ff, m.routing)

    def new(x, L):
        return ops.moe(x, L.router, getattr(L, "router_bias", None), L.experts_gu,
                       L.experts_down, w.expert_ff, m.routing)
    run(old), run(new)                                    # compiled, warmed
    G = ops._moe_cpu
    for r in range(rounds):
        a, oa = run(old)
        b, ob = run(new)
        t_old.append(a)
        t_new.append(b)
        for p, q in zip(oa, ob):
            total += 1
            same += p.tobytes() == q.tobytes()
        for name, fn in (("old", lambda x, L: ops.linear(x, L.router)),
                         ("new", lambda x, L: G.router_logits(x, L.router))):
            router_t[name].append(run(fn)[0])
        print(f"round {r + 1}: old {a * 1e3:.3f} ms, new {b * 1e3:.3f} ms a layer call "
              f"({b / a:.3f}x); router old {router_t['old'][-1] * 1e6:.0f} us, new "
              f"{router_t['new'][-1] * 1e6:.0f} us", flush=True)
    print(f"{path.name}: {len(layers)} MoE layers, {calls} rows x {rounds} rounds; median a "
          f"layer call old {st.median(t_old) * 1e3:.3f} ms, new {st.median(t_new) * 1e3:.3f} ms "
          f"({st.median(t_new) / st.median(t_old):.3f}x); router old "
          f"{st.median(router_t['old']) * 1e6:.0f} us, new {st.median(router_t['new']) * 1e6:.0f} us; "
          f"outputs byte-equal {same}/{total}", flush=True)
    import os
    print("load average", os.getloadavg(), flush=True)


if __name__ == "__main__":
    main()
