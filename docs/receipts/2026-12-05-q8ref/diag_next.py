"""foldserve on the qwen3next / qwen35moe Q8_0 GGUF (the family's switch as set: q8_0 x), each
prompt's first steps' top-5 logprobs against the record's "Q8_0 q8_0" reference, llama.cpp's own
Q8_0 run and llama.cpp on the Q8_0 weights as F32 (teacher-forced on each one's own path).

    PYTHONPATH=. python docs/receipts/2026-12-05-q8ref/diag_next.py [qwen3next|qwen35moe] [float]
"""
import json
import sys
from pathlib import Path

import numpy as np

import kernels
kernels.init()
from server.engine.engine import Engine
from server.engine.weights import load
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from tools.refs import next_gguf as ng

arch = sys.argv[1] if len(sys.argv) > 1 else "qwen3next"
name = {"qwen3next": "qwen3next-tiny", "qwen35moe": "qwen35moe-tiny"}[arch]
rec = json.loads(Path(f"tests/data/qwen3next/{name}-gguf.json").read_text())
ld = load(str(ng.build_once("Q8_0", arch)[0]), progress=False)
if len(sys.argv) > 2:
    sys.path.insert(0, "tests/model")
    from q8_0_x import float_x
    with float_x():
        eng = Engine(ld.spec, ld.tensors.__getitem__)
else:
    eng = Engine(ld.spec, ld.tensors.__getitem__)
print(name, "q80", getattr(eng.model.ops, "q80", None))
eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256))


def forced(prompt, path, n):
    eng.apply(BeginStep(0, tuple(range(16))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(prompt), True),)))
    rows = []
    for s in range(n):
        row = np.asarray(lg[0], np.float64)
        m = row.max()
        rows.append(row - (m + np.log(np.sum(np.exp(row - m)))))
        lg = eng.apply(RoundStep((Chunk(0, len(prompt) + s, (path[s],), True),)))
    eng.apply(EndStep(0))
    return rows


for c in rec["references"]["Q8_0 q8_0"]["cases"]:
    out = []
    ref = forced(c["prompt_ids"], c["greedy_ids"], 24)
    d = [float(np.max(np.abs(ref[s][t["ids"]] - (np.array(t["logits"]) - c["logsumexp"][s])))) for s, t in enumerate(c["top5"])]
    first = next((i for i, x in enumerate(d) if x > 1e-4), None)
    out.append(f"ref q8_0 first>1e-4 {first} max {max(d):.1e}: " + " ".join(f"{x:.0e}" for x in d[:6]))
    for blk in ("Q8_0", "Q8_0 weights as F32"):
        lc = next(x for x in rec["llama_cpp"][blk]["cases"] if x["name"] == c["name"])
        rows = forced(c["prompt_ids"], lc["greedy_ids"], 6)
        d = [float(np.max(np.abs(rows[s][t["ids"]] - np.array(t["logprobs"])))) if t else float("nan")
             for s, t in enumerate(lc["top5"][:6])]
        out.append(f"llama.cpp {blk} " + " ".join(f"{x:.0e}" for x in d))
    print(f"  {c['name']:7s} | " + " | ".join(out))
