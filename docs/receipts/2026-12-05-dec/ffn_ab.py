"""A/B of the qwen3next MoE block at decode (one token) in one process on the real file:
old = router inside ops.moe, then the shared expert (main at 4bc3f66's order);
new = the router on the helper thread beside the shared expert (qwen3next.ffn now).
Both alternate, layer by layer, fresh random x each call (so other experts each time)."""
import server  # noqa
import sys, time
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
from server.families import qwen3next as Q
f = Foldserve(Path(sys.argv[1]), 2)
m = f.eng.model; ops = m.ops; w = m.w; s = m.spec
def old(L, h, out):
    x, h = ops.add_norm(out, h, L.mlp_norm, s.rms_eps)
    y = ops.moe(x, L.router, None, L.experts_gu, L.experts_down, w.expert_ff, m.routing)
    sh = ops.linear(ops.gate_up_silu(x, L.shared_gu, w.shared_ff), L.shared_down)
    y = y + ops.sigmoid(ops.linear(x, L.shared_gate)) * sh
    return h, y
def new(L, h, out):
    return Q.ffn(ops, m, L, h, out)
rng = np.random.default_rng(0)
d = s.d_model
tt = {"old": 0.0, "new": 0.0}; n = 0
same = True
for it in range(int(sys.argv[2]) if len(sys.argv) > 2 else 100):
    for L in w.layers:
        h = rng.standard_normal((1, d)).astype(np.float32); out = rng.standard_normal((1, d)).astype(np.float32)
        order = (("old", old), ("new", new)) if it % 2 == 0 else (("new", new), ("old", old))
        res = {}
        for name, fn in order:
            t = time.perf_counter(); res[name] = fn(L, h, out); tt[name] += time.perf_counter() - t
        same &= res["old"][1].tobytes() == res["new"][1].tobytes() and res["old"][0].tobytes() == res["new"][0].tobytes()
        n += 1
print(f"{n} layer calls each: old {tt['old'] / n * 1e3:.3f} ms, new {tt['new'] / n * 1e3:.3f} ms a layer "
      f"(new/old {tt['new'] / tt['old']:.3f}); outputs byte-equal: {same}", flush=True)
print("load", open('/proc/loadavg').read().strip())
