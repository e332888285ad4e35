"""In one engine process: the layers' dense Blocks (> 2 MiB) as the GGUF maps them vs hugepage
copies, alternated by round (the head as the tree holds it); ms a step, logits compared."""
import os, time
from dataclasses import fields
from pathlib import Path
import server  # noqa
import numpy as np
import kernels; kernels.init()
from bench.moe_cpu import Foldserve
from kernels.blocks import Blocks, hugepage_copy
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path("/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"), 2)
orig, huge = [], []
mb = 0
for L in f.eng.model.w.layers:
    o, h = {}, {}
    for fl in fields(L):
        w = getattr(L, fl.name)
        if isinstance(w, Blocks) and isinstance(w.data, np.ndarray) and w.data.nbytes > (2 << 20):
            o[fl.name] = w
            h[fl.name] = Blocks(w.kind, w.rows, w.cols, hugepage_copy(w.data)); mb += w.data.nbytes
    orig.append(o); huge.append(h)
print("copied MB", mb / 1e6, "fields", sorted(orig[0]) , sorted(orig[3]), "load", os.getloadavg(), flush=True)
def use(sets):
    for L, d in zip(f.eng.model.w.layers, sets):
        for k, v in d.items(): setattr(L, k, v)
ms = {"gguf": [], "huge": []}; ref = None
for r in range(8):
    for name, sets in (("gguf", orig), ("huge", huge)):
        use(sets); f._begin(0)
        lg = f.eng.apply(RoundStep((Chunk(0, 0, (1,)),))); nxt = int(np.argmax(lg[0])); got = []
        t = time.perf_counter()
        for k in range(16):
            lg = f.eng.apply(RoundStep((Chunk(0, 1 + k, (nxt,)),))); nxt = int(np.argmax(lg[0])); got.append(lg[0].tobytes())
        ms[name].append((time.perf_counter() - t) / 16 * 1e3); f._end(1)
        if ref is None: ref = got
        assert got == ref, name
    print(f"round {r}: gguf {ms['gguf'][-1]:.2f} huge {ms['huge'][-1]:.2f} ratio {ms['huge'][-1]/ms['gguf'][-1]:.3f}", flush=True)
rr = [h / g for h, g in zip(ms["huge"], ms["gguf"])]
print(f"gguf median {np.median(ms['gguf']):.2f} huge median {np.median(ms['huge']):.2f}; by round median {np.median(rr):.3f}; logits equal; load {os.getloadavg()}")
