"""The reference side of the route diagnosis: transformers (the "Q8_0 q8_0" reference's model,
tools/refs/record_q8ref.glm53_model) on one case's prompt (one forward), every MoE router's
chosen experts per row with the biased-score margin (k-th minus (k+1)-th of the group-masked
sigmoid + bias, as transformers chooses), every indexer's chosen token indices, the last row's
log-softmax top ids. With FLIP "call row col": that one q8_0 rounding (the call-th rounded input,
its row and column) turned to its other neighbour. Also the 8 roundings nearest their tie.
    /work/venv-ref/bin/python routes_ref.py CASE OUT.json [FLOAT|Q8] [CALL ROW COL]"""
import importlib.util, json, sys, tempfile
from pathlib import Path
import numpy as np, torch
ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("record_q8ref", ROOT / "tools/refs/record_q8ref.py")
rq = importlib.util.module_from_spec(spec); spec.loader.exec_module(rq)
case, out = sys.argv[1], Path(sys.argv[2])
mode = sys.argv[3] if len(sys.argv) > 3 else "Q8"
flip = tuple(int(v) for v in sys.argv[4:7]) if len(sys.argv) > 6 else None
rec = json.loads((ROOT / "tests/data/glm53/glm53-tiny.json").read_text())
c = next(c for c in rec["q8_0"]["references"]["Q8_0 q8_0"]["cases"] if c["name"] == case)
torch.set_num_threads(2)
model, q8_params, _, _, _ = rq.glm53_model(rec, Path(tempfile.mkdtemp()))
from transformers.models.glm5_next import modeling_glm5_next as G
routes, ixs, near = [], [], []
state = {"call": 0}
fwd = G.Glm5NextTextTopkRouter.forward
def router(self, h):
    logits, w, idx = fwd(self, h)
    s = (logits.sigmoid() + self.e_score_correction_bias).detach().numpy()
    srt = -np.sort(-s, axis=1)
    routes.append({"ids": np.sort(idx.numpy(), axis=1).tolist(),
                   "margin": (srt[:, self.top_k - 1] - srt[:, self.top_k]).astype(float).tolist()})
    return logits, w, idx
G.Glm5NextTextTopkRouter.forward = router
ixf = G.Glm5NextTextIndexer.forward
def indexer(self, *a, **kw):
    r = ixf(self, *a, **kw)
    ixs.append(np.sort(r[0].numpy(), axis=-1).tolist())
    return r
G.Glm5NextTextIndexer.forward = indexer
pool_margins = []
topk0 = torch.Tensor.topk
def topk(t, k, dim=-1, *a, **kw):
    r = topk0(t, k, dim, *a, **kw)
    if t.dim() == 3 and t.shape[-1] > k:        # the indexer's pool scores [B, S, pools]
        v = torch.sort(t.double(), dim=-1, descending=True).values[0]
        lo = torch.finfo(t.dtype).min
        m = torch.where(v[:, k] > lo, v[:, k - 1] - v[:, k], torch.full_like(v[:, 0], float("inf")))
        scale = v[:, 0].abs().clamp_min(1e-30)
        pool_margins.append({"k": k, "margin": m.tolist(), "rel": (m / scale).tolist(),
                             "kth": v[:, k - 1].tolist()})
    return r
torch.Tensor.topk = topk
orig_q = rq.q8_0
def hooked(x, perm=None):
    a = x.detach().float().numpy().reshape(-1, x.shape[-1])
    q, dx = rq.quantize_q8_0(a)
    k = state["call"]; state["call"] += 1
    b = a.reshape(a.shape[0], -1, 32)
    d = (np.abs(b).max(2) / np.float32(127)).astype(np.float32)
    idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * idd[:, :, None]).astype(np.float32).reshape(a.shape)
    dist = np.abs(np.abs(v - np.trunc(v)) - np.float32(0.5))
    dist[np.abs(v) >= 126.5] = 9
    r, col = np.unravel_index(np.argmin(dist), dist.shape)
    near.append((float(dist[r, col]), k, int(r), int(col), float(v[r, col])))
    if flip is not None and flip[0] == k:
        q = q.copy(); val = v[flip[1], flip[2]]
        q[flip[1], flip[2]] += -np.sign(val) if abs(q[flip[1], flip[2]]) > abs(val) else np.sign(val)
    y = (q.astype(np.float32).reshape(a.shape[0], -1, 32) * dx[:, :, None]).reshape(a.shape)
    return torch.from_numpy(np.ascontiguousarray(y.reshape(x.shape)))
rq.q8_0 = hooked
import contextlib
cm = rq.q8_0_activations(model, [], only=q8_params) if mode == "Q8" else contextlib.nullcontext()
with cm, torch.no_grad():
    lg = model(input_ids=torch.tensor([c["prompt_ids"]]), use_cache=True).logits[0, -1].double()
lp = (lg - torch.logsumexp(lg, 0)).numpy()
top = np.argsort(-lp)[:8]
near.sort()
out.write_text(json.dumps({"case": case, "mode": mode, "flip": flip, "routes": routes, "indexer": ixs, "pool_margins": pool_margins,
                           "top": [[int(t), float(lp[t])] for t in top], "nearest_ties": near[:8]}))
print(case, mode, flip, "top", [(int(t), round(float(lp[t]), 6)) for t in top[:5]], "nearest", near[:3])
