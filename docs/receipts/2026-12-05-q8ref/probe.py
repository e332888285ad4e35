"""How near a q8_0 rounding tie the reference's inputs come: the record's "Q8_0 q8_0" greedy
path, teacher-forced in one pass (each row quantized alone, as in the cached steps), every
q8_0-rounded input's |frac(x / d)| distance to 0.5 (in q units), per position its minimum
and which product. A foldserve input within float32 summation-order noise of such a tie
can round the other way (one q of 1/127 of its block's max).

    /work/venv-ref/bin/python docs/receipts/2026-12-05-q8ref/probe.py NAME [prompt ...]
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
name = sys.argv[1]
only = sys.argv[2:]
rec = json.loads((ROOT / f"tests/data/moe/{name}.json").read_text())
model, _ = rm.load_hf(Path(f"/tmp/q8ref-work/{name}/hf-Q8_0-dequant"))
orig_q8 = rq.q8_0
found = []


def probe(x, perm=None):
    a = x.detach().float().numpy().reshape(-1, x.shape[-1])
    b = a.reshape(a.shape[0], -1, 32)
    amax = np.abs(b).max(2)
    d = (amax / np.float32(127)).astype(np.float32)
    idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * idd[:, :, None]).astype(np.float32)
    dist = np.abs(np.abs(v - np.trunc(v)) - np.float32(0.5))
    dist[np.abs(v) >= 126.5] = 9        # the block's max: always q = +-127
    found.append(dist.reshape(a.shape[0], -1).min(1))
    return orig_q8(x, perm)


rq.q8_0 = probe
for c in rec["references"]["Q8_0 q8_0"]["cases"]:
    if only and c["name"] not in only:
        continue
    found.clear()
    ids = c["prompt_ids"] + c["greedy_ids"][:-1]
    with rq.q8_0_activations(model, rq.FLOAT_X), torch.no_grad():
        model(input_ids=torch.tensor([ids]), use_cache=False)
    per_pos = np.min(np.stack([f for f in found if f.shape[0] == len(ids)]), 0)
    n0 = len(c["prompt_ids"])
    near = sorted(range(len(ids)), key=lambda i: per_pos[i])[:4]
    print(f"{c['name']:11s} n0 {n0:3d} | nearest ties: " + ", ".join(
        f"pos {i} ({'step ' + str(i - n0 + 1) if i >= n0 - 1 else 'prompt'}) {per_pos[i]:.1e}" for i in near))
