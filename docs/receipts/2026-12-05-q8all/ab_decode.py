"""Decode b1 and prefill 512 with every Q8_0 product on q8_0 x (ops.q80 True) and on float32 x
(False: main's arithmetic, the head too), alternated on ONE loaded engine (bench/moe_cpu's
Foldserve: the same process, the same pages of the file), so the machine's moment hits both.

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-q8all/ab_decode.py FILE.gguf THREADS [ROUNDS]
"""
import sys
from pathlib import Path

import kernels

kernels.init()
from bench.moe_cpu import Foldserve  # noqa: E402

path, threads = Path(sys.argv[1]), int(sys.argv[2])
rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
f = Foldserve(path, threads)
ops = f.eng.model.ops
print(f"{path.name} threads {threads} ops {ops.name} loadavg {open('/proc/loadavg').read().split()[:3]}")
for r in range(rounds):
    for q in (True, False):
        ops.q80 = q
        f.decode(1, 4)                                # warm this arithmetic's kernels
        tg, tg_moe = f.decode(1, 32)
        pp, pp_moe = f.prefill(512)
        print(f"  round {r + 1} {'q8_0 x ' if q else 'float x'}: tg {tg:6.2f} tok/s (MoE {tg_moe:.0%})  "
              f"pp512 {pp:7.2f} tok/s (MoE {pp_moe:.0%})  load {open('/proc/loadavg').read().split()[0]}",
              flush=True)
ops.q80 = True
