"""One process, the Qwen3.5 file: b1 decode steps and prefill 512, the engine's GDN kernel
swapped between f54632e's (kernels/_gdn_cpu_orig_tmp.py) and this tree's, alternating blocks."""
import json, sys, time, os
from pathlib import Path
import server  # noqa
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
import kernels
kernels.init()
from kernels import gdn_cpu, _gdn_cpu_orig_tmp as old
f = Foldserve(Path("/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
kern = {"old": old.chunk, "new": gdn_cpu.chunk}
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
res = {k: {"tg": [], "pp": []} for k in kern}
for name in kern:                              # warm both
    ops._gdn_chunk = kern[name]
    f._begin(0); f.eng.apply(RoundStep((Chunk(0, 0, toks[:64]),))); f._end(1)
for rep in range(4):
    for name in (("old", "new") if rep % 2 == 0 else ("new", "old")):
        ops._gdn_chunk = kern[name]
        f._begin(0)
        t = time.perf_counter()
        f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
        res[name]["pp"].append(time.perf_counter() - t)
        lg = f.eng.apply(RoundStep((Chunk(0, 512, (1,)),)))
        nxt = int(np.argmax(lg[0]))
        t = time.perf_counter()
        for k in range(32):
            lg = f.eng.apply(RoundStep((Chunk(0, 513 + k, (nxt,)),)))
            nxt = int(np.argmax(lg[0]))
        res[name]["tg"].append((time.perf_counter() - t) / 32)
        f._end(1)
        print(rep, name, f"pp512 {res[name]['pp'][-1]*1e3:.0f} ms  tg {res[name]['tg'][-1]*1e3:.2f} ms  load {os.getloadavg()[0]:.2f}", flush=True)
for name in kern:
    print(name, "median pp512 ms", round(float(np.median(res[name]["pp"])) * 1e3, 1), "tok/s", round(512 / float(np.median(res[name]["pp"])), 1),
          "| median tg ms", round(float(np.median(res[name]["tg"])) * 1e3, 2), "tok/s", round(1 / float(np.median(res[name]["tg"])), 2))
