"""Which product list foldserve's logits follow: the reference teacher-forced on its greedy
path with FLOAT_X plus one more group of products on float x, each set beside foldserve's
logits (diag.py's OUT.json): max |difference| over the first STEPS steps of each prompt.

    /work/venv-ref/bin/python docs/receipts/2026-12-05-q8ref/which.py NAME FOLDSERVE.json [STEPS]
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
name, fold = sys.argv[1], json.loads(Path(sys.argv[2]).read_text())
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1
rec = json.loads((ROOT / f"tests/data/moe/{name}.json").read_text())
model, _ = rm.load_hf(Path(f"/tmp/q8ref-work/{name}/hf-Q8_0-dequant"))
GROUPS = {"none": [], "o_proj": [r"o_proj"], "q_a": [r"q_a_proj"], "q_b/q": [r"q_b_proj", r"self_attn\.q_proj"],
          "kv_a": [r"kv_a_proj"], "kv_b (quantized)": None, "dense mlp": [r"\.mlp\.(gate|up|down)_proj"],
          "shared": [r"shared_experts"], "experts": [r"experts\.(gate_up|down)_proj"], "head": [r"lm_head"],
          "all": [r"."]}
for g, extra in GROUPS.items():
    fx = [r for r in rq.FLOAT_X if "kv_b" not in r] if extra is None else rq.FLOAT_X + extra
    out = []
    for c in rec["references"]["Q8_0 q8_0"]["cases"]:
        ids = c["prompt_ids"] + c["greedy_ids"][:-1]
        n0 = len(c["prompt_ids"])
        with rq.q8_0_activations(model, fx), torch.no_grad():
            lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
        d = max(float(np.max(np.abs(lg[n0 - 1 + s][c["top5"][s]["ids"]].numpy() - np.array(fold[c["name"]][s]))))
                for s in range(steps))
        out.append(f"{d:.0e}")
    print(f"{g:18s} " + " ".join(out), flush=True)
