"""(q5x: the 2026-12-05-q8ref receipt's perturb.py on glm4moe-tiny's re-recorded "Q4_K_M q8_0"
block: its Q8_0 and Q5_0 products' inputs jittered.)

How far the "Q8_0 q8_0" reference moves when every q8_0-rounded input is moved by one (ULPS)
float32 ulp up or down at random before rounding (a float32 summation order's size of difference),
teacher-forced on its own greedy path: per prompt and trial, the max |top-5 logit change| over
the 24 steps and the first step over 1e-3.

    /work/venv-ref/bin/python docs/receipts/2026-12-06-q5x/perturb_q4km.py [TRIALS [ULPS]]
"""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools/refs"))
spec = importlib.util.spec_from_file_location("record_q8ref", ROOT / "tools/refs/record_q8ref.py")
rq = importlib.util.module_from_spec(spec); spec.loader.exec_module(rq)
rm = rq._by_path("record_moe")
name = "glm4moe-tiny"
trials = int(sys.argv[1]) if len(sys.argv) > 1 else 3
ulps = int(sys.argv[2]) if len(sys.argv) > 2 else 1        # how many ulps each input moves
perms = {}
fx = rq.float_x_of(name, None)
if name in rq.NEXT:
    import tempfile
    rec = json.loads((ROOT / f"tests/data/qwen3next/{name}-gguf.json").read_text())
    model, perms, _ = rq.next_model(name, fx, rec, ROOT / "tests/data/qwen3next", Path(tempfile.mkdtemp()))
else:
    rec = json.loads((ROOT / f"tests/data/moe/{name}.json").read_text())
    model, _ = rm.load_hf(Path(f"/tmp/q5x-q8ref-work/{name}/hf-Q4_K_M-dequant"))
    mc = rq._by_path("moe_checkpoint")
    only = set(rq.q8_0_params(mc, mc.FAMILIES[name], "Q4_K_M"))
orig = rq.q8_0
rng = np.random.default_rng(0)
noise = {"on": False}


def jitter(x, perm=None):
    if noise["on"]:
        a = x.detach().float().numpy()
        step = rng.choice(np.array([-1, 1], np.int32), size=a.shape)
        for _ in range(ulps):
            a = np.nextafter(a, np.where(step > 0, np.float32(np.inf), np.float32(-np.inf))).astype(np.float32)
        x = torch.from_numpy(a)
    return orig(x, perm)


rq.q8_0 = jitter


def run(c):
    ids = c["prompt_ids"] + c["greedy_ids"][:-1]
    n0 = len(c["prompt_ids"])
    with rq.q8_0_activations(model, [], perms, only=only), torch.no_grad():
        lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    return np.stack([lg[n0 - 1 + s][c["top5"][s]["ids"]].numpy() for s in range(len(c["greedy_ids"]))])


for c in rec["references"]["Q4_K_M q8_0"]["cases"]:
    noise["on"] = False
    base = run(c)
    noise["on"] = True
    out = []
    for _ in range(trials):
        d = np.max(np.abs(run(c) - base), 1)
        first = next((i for i, x in enumerate(d) if x > 1e-3), None)
        out.append(f"max {d.max():.1e} first>1e-3 {first}")
    print(f"{c['name']:11s} " + " | ".join(out), flush=True)
