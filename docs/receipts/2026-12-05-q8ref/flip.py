"""The reference with ONE q8_0 rounding turned the other way: the input nearest its rounding
tie (probe.py's measure) among the positions up to `upto` (default: all) rounded to its other
neighbour, teacher-forced on the record's "Q8_0 q8_0" greedy path; each step's top-5 logits set
beside the reference's and foldserve's (diag.py's OUT.json): if foldserve equals the flipped
reference, foldserve's difference is that one rounding.

    /work/venv-ref/bin/python docs/receipts/2026-12-05-q8ref/flip.py NAME PROMPT FOLDSERVE.json
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
name, prompt, fold = sys.argv[1], sys.argv[2], json.loads(Path(sys.argv[3]).read_text())
rec = json.loads((ROOT / f"tests/data/moe/{name}.json").read_text())
c = next(c for c in rec["references"]["Q8_0 q8_0"]["cases"] if c["name"] == prompt)
model, _ = rm.load_hf(Path(f"/tmp/q8ref-work/{name}/hf-Q8_0-dequant"))
ids = c["prompt_ids"] + c["greedy_ids"][:-1]
n0 = len(ids) - len(c["greedy_ids"]) + 1
state = {"call": 0, "best": (9.0, None), "flip": None}
quant = rq.quantize_q8_0


def hooked(x, perm=None):
    a = x.detach().float().numpy().reshape(-1, x.shape[-1])
    q, dx = quant(a)
    k = state["call"]
    state["call"] += 1
    b = a.reshape(a.shape[0], -1, 32)
    d = (np.abs(b).max(2) / np.float32(127)).astype(np.float32)
    idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * idd[:, :, None]).astype(np.float32).reshape(a.shape)
    if state["flip"] is None:
        dist = np.abs(np.abs(v - np.trunc(v)) - np.float32(0.5))
        dist[np.abs(v) >= 126.5] = 9
        r, col = np.unravel_index(np.argmin(dist), dist.shape)
        if dist[r, col] < state["best"][0]:
            state["best"] = (float(dist[r, col]), (k, int(r), int(col), float(v[r, col])))
    elif state["flip"][0] == k:
        _, r, col, val = state["flip"]
        q = q.copy()
        q[r, col] += -np.sign(val) if abs(q[r, col]) > abs(val) else np.sign(val)
    y = (q.astype(np.float32).reshape(a.shape[0], -1, 32) * dx[:, :, None]).reshape(a.shape)
    return torch.from_numpy(np.ascontiguousarray(y.reshape(x.shape)))


rq.q8_0 = hooked


def run():
    state["call"] = 0
    with rq.q8_0_activations(model, rq.FLOAT_X), torch.no_grad():
        lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    return [lg[n0 - 1 + s][c["top5"][s]["ids"]].numpy() for s in range(len(c["greedy_ids"]))]


base = run()
state["flip"] = state["best"][1]
print(f"{name} {prompt}: nearest tie {state['best'][0]:.1e} (call {state['flip'][0]}, row {state['flip'][1]}, "
      f"col {state['flip'][2]}, x/d {state['flip'][3]:.6f}); rounded the other way:")
flipped = run()
for s in range(len(c["greedy_ids"])):
    f = np.array(fold[prompt][s])
    print(f"  step {s:2d} |fold - ref| {np.max(np.abs(f - base[s])):.1e}  |fold - flipped ref| "
          f"{np.max(np.abs(f - flipped[s])):.1e}")
