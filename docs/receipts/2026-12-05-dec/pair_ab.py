import server  # noqa
import sys, time
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
import kernels; kernels.init()
from kernels import moe_cpu, kquant_cpu
f = Foldserve(Path(sys.argv[1]), 2)
rng = np.random.default_rng(1)
same = True; t_old = t_new = 0.0; n = 0
def old(x, g, u, ex, offs):
    q, dx = kquant_cpu.quantize_q80(x); N = g.data.shape[1]
    gu = np.empty((x.shape[0], 2 * N), np.float32)
    gu[:, :N] = kquant_cpu.q80_grouped_q(q, dx, g.data, ex, offs)
    gu[:, N:] = kquant_cpu.q80_grouped_q(q, dx, u.data, ex, offs)
    return gu
for it in range(int(sys.argv[2])):
    for L in f.eng.model.w.layers:
        g, u = L.experts_gu.gate, L.experts_gu.up
        T = 1 if it % 4 else 3
        ex = np.sort(rng.choice(256, 8, replace=False)).astype(np.int64)
        offs = np.arange(9, dtype=np.int64) * T
        x = rng.standard_normal((8 * T, 2048)).astype(np.float32)
        if it % 2:
            t = time.perf_counter(); a = old(x, g, u, ex, offs); t_old += time.perf_counter() - t
            t = time.perf_counter(); b = moe_cpu.gate_up(x, g, u, ex, offs, True, True); t_new += time.perf_counter() - t
        else:
            t = time.perf_counter(); b = moe_cpu.gate_up(x, g, u, ex, offs, True, True); t_new += time.perf_counter() - t
            t = time.perf_counter(); a = old(x, g, u, ex, offs); t_old += time.perf_counter() - t
        same &= a.tobytes() == b.tobytes(); n += 1
print(f"gate|up of 8 experts, {n} calls each: two rounds {t_old / n * 1e3:.3f} ms, one round {t_new / n * 1e3:.3f} ms (one/two {t_new / t_old:.3f}); byte-equal: {same}; pair view: {moe_cpu._pair(g.data, u.data) is not None}")
print("load", open('/proc/loadavg').read().strip())
