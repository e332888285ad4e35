"""One engine, pp512 alternating (argument 3 "all": off also multiplies MixedBlocks parts one
quantization each, as main): the ref form on (this branch) / off (_ref_form -> 0: the
halves of attention.ref, main's path for the attention)."""
import sys, time, os
import server  # noqa
from pathlib import Path
import numpy as np
from bench.moe_cpu import Foldserve
ALL = len(sys.argv) > 3 and sys.argv[3] == "all"
f = Foldserve(Path(sys.argv[1]), 2)
f.warm()
ops = f.eng.model.ops
form = type(ops)._ref_form
waa = ops.write_and_attend
tw = [0.0]
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return waa(*a, **k)
    finally:
        tw[0] += time.perf_counter() - t
ops.write_and_attend = timed
att = {"on": [], "off": []}
res = {"on": [], "off": []}
for k in range(int(sys.argv[2])):
    for mode in (("on", "off") if k % 2 == 0 else ("off", "on")):
        ops._ref_form = (lambda *a: form(ops, *a)) if mode == "on" else (lambda *a: 0)
        if ALL:   # off: the MixedBlocks parts one product each, as main
            from kernels import qmatmul
            ops._mixed_parts = ((lambda x, w: type(ops)._mixed_parts(ops, x, w)) if mode == "on" else
                                (lambda x, w: [qmatmul.cpu(x, p, q8=ops.kq8, q80=ops.q80) for p in w]))
        tw[0] = 0.0
        pp, _ = f.prefill(512)
        res[mode].append(pp)
        att[mode].append(tw[0] * 1e3)
        print(mode, "%.1f tok/s, write_and_attend %.1f ms" % (pp, tw[0] * 1e3), os.getloadavg()[0], flush=True)
for m in res: print(m, "pp512 median %.1f" % np.median(res[m]), ["%.1f" % x for x in res[m]], "write_and_attend median %.1f ms" % np.median(att[m]), ["%.0f" % x for x in att[m]])
