"""foldserve's side of the route diagnosis: the engine on the Q8_0 copy (q8_0 x by default;
TF_Q8_0_X=float for float x), one case's prompt in one round: every MoE layer's chosen experts
per row (kernels.moe.route, wrapped) with the biased-score margin, every DSA round's choices,
the last row's log-softmax top ids.
    PYTHONPATH=$PWD python routes_ours.py CASE Q8_0.gguf OUT.json"""
import json, sys
from pathlib import Path
import numpy as np
import kernels.moe as M
from server.engine.engine import Engine
from server.engine.weights import load
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
case, path, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
rec = json.loads(Path("tests/data/glm53/glm53-tiny.json").read_text())
c = next(c for c in rec["q8_0"]["references"]["Q8_0 q8_0"]["cases"] if c["name"] == case)
routes = []
route0 = M.route
def route(logits, routing, bias=None):
    ids, wts = route0(logits, routing, bias)
    s = 1 / (1 + np.exp(-np.asarray(logits, np.float64))) + (0 if bias is None else np.asarray(bias, np.float64))
    srt = -np.sort(-s, axis=1); k = ids.shape[1]
    routes.append({"ids": np.sort(ids, axis=1).tolist(), "margin": (srt[:, k - 1] - srt[:, k]).tolist()})
    return ids, wts
M.route = route
ld = load(path, progress=False)
eng = Engine(ld.spec, ld.tensors.__getitem__)
ixs = []
ops = eng.model.ops
dsa0 = ops.dsa_attend
def dsa(*a, **kw):
    r = dsa0(*a, **kw)
    ch = r[1]
    ixs.append(None if ch is None else [np.asarray(x).tolist() if x is not None else None for x in ch])
    return r
ops.dsa_attend = dsa
eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256)); eng.apply(BeginStep(0, tuple(range(16))))
lg = np.asarray(eng.apply(RoundStep((Chunk(0, 0, tuple(c["prompt_ids"]), True),)))[0], np.float64)
eng.apply(EndStep(0))
lp = lg - lg.max() - np.log(np.exp(lg - lg.max()).sum())
top = np.argsort(-lp)[:8]
out.write_text(json.dumps({"case": case, "q80": bool(ops.q80), "routes": routes, "dsa": ixs,
                           "top": [[int(t), float(lp[t])] for t in top]}))
print(case, "q80", ops.q80, "top", [(int(t), round(float(lp[t]), 6)) for t in top[:5]])
