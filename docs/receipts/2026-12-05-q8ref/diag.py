"""foldserve (the int8-x switch as the family sets it) against a record's "Q8_0 q8_0" reference,
teacher-forced on the reference's greedy path: per prompt, the max |logit difference| over the
reference's top-5 ids at each step, and the first step past 1e-4.

    PYTHONPATH=. python docs/receipts/2026-12-05-q8ref/diag.py NAME [KEY [OUT.json: the logits [float: the switch off]]]
"""
import json
import sys
from pathlib import Path

import numpy as np

import kernels
kernels.init()
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from tools.refs import moe_checkpoint as mc

name = sys.argv[1]
key = sys.argv[2] if len(sys.argv) > 2 else "Q8_0 q8_0"
dump = sys.argv[3] if len(sys.argv) > 3 else None
got = {}
rec = json.loads(Path(f"tests/data/moe/{name}.json").read_text())
b = mc.build_once(name)
if len(sys.argv) > 4 and sys.argv[4] == "float":          # the family's int8-x switch off
    sys.path.insert(0, "tests/model")
    from q8_0_x import float_x
    with float_x():
        opened = open_model(str(b.gguf["Q8_0"]), progress=False)
else:
    opened = open_model(str(b.gguf["Q8_0"]), progress=False)
ops = opened.engine.model.ops
print(name, "ops", ops.name, "q80", getattr(ops, "q80", None))
eng = opened.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
for c in rec["references"][key]["cases"]:
    ids = c["prompt_ids"] + c["greedy_ids"][:-1]
    n0 = len(c["prompt_ids"])
    eng.apply(BeginStep(0, tuple(range(8))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(c["prompt_ids"]), True),)))[0]
    d = []
    got[c["name"]] = []
    for step in range(len(c["greedy_ids"])):
        t = c["top5"][step]
        got[c["name"]].append([float(v) for v in lg[t["ids"]]])
        d.append(float(np.max(np.abs(lg[t["ids"]] - np.array(t["logits"])))))
        if step + 1 < len(c["greedy_ids"]):
            lg = eng.apply(RoundStep((Chunk(0, n0 + step, (c["greedy_ids"][step],), True),)))[0]
    eng.apply(EndStep(0))
    first = next((i for i, x in enumerate(d) if x > 1e-4), None)
    print(f"  {c['name']:11s} step0 {d[0]:.2e} max {max(d):.2e} first>1e-4 {first} "
          f"| {' '.join(f'{x:.0e}' for x in d)}")
if dump:
    Path(dump).write_text(json.dumps(got))
