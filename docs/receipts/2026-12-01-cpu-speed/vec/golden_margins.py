"""The CPU forward (numba over the blocks) against the golden file: each case's first-step
top-5 logits (max relative error; the test's bound is 1e-3) and the greedy match through
exact_prefix. Run from the worktree root: python3 THIS_FILE."""
import json, os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../.."))
import numpy as np
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../..")
g = json.load(open(os.path.join(root, "tests/data/smollm2-135m-instruct-q4_1.json")))
m = open_model(None, progress=False)
eng = m.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
for c in g["cases"]:
    eng.apply(BeginStep(0, tuple(range(8))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(c["prompt_ids"]), True),)))[0]
    ref = c["top5"][0]
    rel = float(np.max(np.abs(lg[ref["ids"]] - np.array(ref["logits"])) / np.abs(ref["logits"])))
    n = c["exact_prefix"]
    out = generate(m, c["prompt_ids"], SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    k = next((i for i in range(n) if out[i] != c["greedy_ids"][i]), n)
    print(json.dumps({"case": c["name"], "first_step_top5_max_rel": rel,
                      "top5_order_equal": list(np.argsort(-lg, kind="stable")[:5]) == ref["ids"],
                      "greedy_equal": k, "exact_prefix": n}), flush=True)
