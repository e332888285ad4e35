"""foldserve's side of xq_ref.py: the engine on the Q8_0 copy (q8_0 x), one case's prompt in one
round, every Q8_0 product's input rows quantized by kernels/kquant_cpu.quantize_q8_0 (the numpy
form of what the kernels do), keyed as xq_ref.py keys them.
    PYTHONPATH=$PWD python xq_ours.py CASE Q8_0.gguf OUT.pkl"""
import json, pickle, sys
from pathlib import Path
import numpy as np
import kernels
kernels.init()
import kernels.moe as M
import kernels.moe_cpu as MC
import kernels.qmatmul as QM
from kernels import kquant_cpu as KQ
import server.families.glm5_next as F
from server.engine.engine import Engine
from server.engine.weights import load
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
case, path, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
rec = json.loads(Path("tests/data/glm53/glm53-tiny.json").read_text())
c = next(c for c in rec["q8_0"]["references"]["Q8_0 q8_0"]["cases"] if c["name"] == case)
st = {"layer": None, "n": 0, "L": None, "groups": None}
rows = {}
def put(label, x, keys):
    a = np.ascontiguousarray(x, np.float32)
    q, dx = KQ.quantize_q8_0(a)
    b = a.reshape(a.shape[0], -1, 32)
    d = (np.abs(b).max(2) / np.float32(127)).astype(np.float32)
    idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * idd[:, :, None]).astype(np.float32).reshape(a.shape)
    for i, k in enumerate(keys):
        rows[k] = (q[i].copy(), v[i].copy(), dx[i].copy(), d[i].copy())
fl = F.forward_layer
hidden, mlp_out = {}, {}
def forward_layer(ops, m, L, li, *a):
    st.update(layer=li, n=0, L=L, last=None)
    r = fl(ops, m, L, li, *a)
    hidden[li] = np.array(r[0])
    st["layer"] = None
    return r
F.forward_layer = forward_layer
ffn0 = F.ffn
def ffn(ops, m, I, x):
    r = ffn0(ops, m, I, x)
    if I.router is not None:
        mlp_out[st["layer"]] = np.array(r)
    return r
F.ffn = ffn
cpu0 = QM.cpu
def cpu(x, w, bias=None, q8=False, q80=False):
    if q80 and st.get("last") is not x:       # a MixedBlocks' parts share one x: once
        st["last"] = x
        L, n = st["L"], st["n"]; st["n"] += 1
        if st["layer"] is None:
            label = "head"
        else:
            first = "q_a" if L.sparse else "kda_in"
            seq = [first] + (["mlp_in", "mlp_down"] if L.inner.router is None else ["sh_in", "sh_down"])
            label = seq[n]
        put(label, x, [(st["layer"], label, t, None) for t in range(x.shape[0])])
    return cpu0(x, w, bias, q8=q8, q80=q80)
QM.cpu = cpu
g0 = M.groups
def groups(ids):
    g = g0(ids); st["groups"] = g; return g
M.groups = groups
def tokens():
    return [(int(t), int(e)) for e, rr, _ in st["groups"] for t in rr]
gu0, gm0 = MC.gate_up, MC.grouped_matmul
def gate_up(x, *a, **kw):
    put("exp_in", x, [(st["layer"], "exp_in", t, None) for t, e in tokens()])
    return gu0(x, *a, **kw)
def grouped_matmul(x, *a, **kw):
    if x.shape[1] == 96:     # the down product's input (act); gate|up reaches gate_up
        put("exp_down", x, [(st["layer"], "exp_down", t, e) for t, e in tokens()])
    return gm0(x, *a, **kw)
MC.gate_up, MC.grouped_matmul = gate_up, grouped_matmul
ld = load(path, progress=False)
eng = Engine(ld.spec, ld.tensors.__getitem__)
assert eng.model.ops.q80
choices = {}
ops = eng.model.ops
dsa0 = ops.dsa_attend
def dsa(*a, **kw):               # each sparse layer's chosen token indices a row
    r = dsa0(*a, **kw)
    if r[1] is not None and st["L"].indexer is not None:
        choices[st["layer"]] = [sorted(int(x) for x in np.asarray(row).reshape(-1)) for row in r[1]]
    return r
ops.dsa_attend = dsa
eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256)); eng.apply(BeginStep(0, tuple(range(16))))
lg = np.asarray(eng.apply(RoundStep((Chunk(0, 0, tuple(c["prompt_ids"]), True),)))[0], np.float64)
eng.apply(EndStep(0))
lp = lg - lg.max() - np.log(np.exp(lg - lg.max()).sum())
top = np.argsort(-lp)[:8]
out.write_bytes(pickle.dumps({"hidden": hidden, "mlp_out": mlp_out, "rows": rows, "choices": choices, "top": [(int(t), float(lp[t])) for t in top]}))
print(case, "rows", len(rows), "top", [(int(t), round(float(lp[t]), 6)) for t in top[:5]])
