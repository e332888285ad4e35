"""One tree's prefill 512 (one round) and 16 b1 decode steps on the Qwen3.5 file: wall and
this process's CPU time, the GDN op's wall and thread-CPU share. Run per tree, in a fresh process."""
import json, sys, time
from pathlib import Path
import server  # noqa
import numpy as np
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path("/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"), 2)
ops = f.eng.model.ops
acc = {"gdn": 0.0}
inner = ops.gdn_round
def timed(*a, **k):
    t = time.perf_counter()
    try:
        return inner(*a, **k)
    finally:
        acc["gdn"] += time.perf_counter() - t
ops.gdn_round = timed
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 512))
res = {"pp_wall": [], "pp_cpu": [], "pp_gdn": [], "tg_wall": [], "tg_cpu": [], "tg_gdn": []}
for rep in range(3):
    f._begin(0)
    acc["gdn"] = 0.0
    t, c = time.perf_counter(), time.process_time()
    f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
    res["pp_wall"].append(time.perf_counter() - t); res["pp_cpu"].append(time.process_time() - c); res["pp_gdn"].append(acc["gdn"])
    f._end(1)
    f._begin(0)
    lg = f.eng.apply(RoundStep((Chunk(0, 0, (1,)),)))
    nxt = int(np.argmax(lg[0]))
    acc["gdn"] = 0.0
    t, c = time.perf_counter(), time.process_time()
    for k in range(16):
        lg = f.eng.apply(RoundStep((Chunk(0, 1 + k, (nxt,)),)))
        nxt = int(np.argmax(lg[0]))
    res["tg_wall"].append((time.perf_counter() - t) / 16); res["tg_cpu"].append((time.process_time() - c) / 16); res["tg_gdn"].append(acc["gdn"] / 16)
    f._end(1)
print("RESULT", json.dumps({k: min(v) for k, v in res.items()}))
