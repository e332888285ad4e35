"""Every q8_0-rounded input row of the "Q8_0 q8_0" reference's prompt pass on one case, keyed
(layer, product, token[, expert]): its q (int8) and x * (1/d) (where a rounding sits against
its tie); with FLIPs "layer,product,token,col[,expert]" those values turned to their other
neighbour (in every product that rounds that input: q, k and v alike); with ",d" after the
expert ("-" for none) the block's f16 scale turned to its other float16 neighbour instead. tools/refs/record_q8ref.glm53_model's model; xq_cmp.py sets it beside foldserve's.
    /work/venv-ref/bin/python xq_ref.py CASE OUT.pkl [LAYER,PRODUCT,TOKEN,COL[,EXPERT] ...]"""
import importlib.util, json, pickle, sys, tempfile
from pathlib import Path
import numpy as np, torch
ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("record_q8ref", ROOT / "tools/refs/record_q8ref.py")
rq = importlib.util.module_from_spec(spec); spec.loader.exec_module(rq)
case, out = sys.argv[1], Path(sys.argv[2])
flips = []          # LAYER,PRODUCT,TOKEN,COL[,EXPERT]: a value; LAYER,PRODUCT,TOKEN,BLOCK,EXPERT,d: a scale
for f in sys.argv[3:]:
    p = f.split(",")
    e = int(p[4]) if len(p) > 4 and p[4] != "-" else None
    flips.append((int(p[0]), p[1], int(p[2]), int(p[3]), e, "d" if len(p) > 5 and p[5] == "d" else "x"))
flip = flips or None
rec = json.loads((ROOT / "tests/data/glm53/glm53-tiny.json").read_text())
c = next(c for c in rec["q8_0"]["references"]["Q8_0 q8_0"]["cases"] if c["name"] == case)
torch.set_num_threads(2)
model, q8_params, _, _, _ = rq.glm53_model(rec, Path(tempfile.mkdtemp()))
from transformers.models.glm5_next import modeling_glm5_next as G
LABEL = [("self_attn.q_proj.", "kda_in"), ("self_attn.k_proj.", "kda_in"), ("self_attn.v_proj.", "kda_in"),
         ("shared_experts.up_proj.", "sh_in"), ("mlp.up_proj.", "mlp_in"), ("self_attn.q_a_proj.", "q_a"), ("shared_experts.gate_proj.", "sh_in"),
         ("shared_experts.down_proj.", "sh_down"), ("experts.gate_up_proj", "exp_in"),
         ("experts.down_proj", "exp_down"), ("mlp.gate_proj.", "mlp_in"), ("mlp.down_proj.", "mlp_down"),
         ("lm_head.", "head")]
SKIP = ("self_attn.k_proj.", "self_attn.v_proj.", "shared_experts.up_proj.", "mlp.up_proj.")
state = {"layer": None}
rows = {}
lf = G.Glm5NextTextDecoderLayer.forward
hidden, mlp_out, attn_out = {}, {}, {}
def layer_fwd(self, *a, **kw):
    state["layer"] = self.layer_idx if hasattr(self, "layer_idx") else self.self_attn.layer_idx
    r = lf(self, *a, **kw)
    hidden[state["layer"]] = (r[0] if isinstance(r, tuple) else r)[0].detach().numpy().copy()
    return r
mf = G.Glm5NextTextMoE.forward
def moe_fwd(self, h):
    r = mf(self, h); mlp_out[state["layer"]] = r[0].detach().numpy().copy(); return r
G.Glm5NextTextMoE.forward = moe_fwd
G.Glm5NextTextDecoderLayer.forward = layer_fwd
routes = {}
rf = G.Glm5NextTextTopkRouter.forward
def router(self, h):        # each layer's chosen experts per token and the biased-score margin
    logits, w, idx = rf(self, h)
    sc = (logits.sigmoid() + self.e_score_correction_bias).detach().double().numpy()
    srt = -np.sort(-sc, axis=1)
    routes[state["layer"]] = {"ids": np.sort(idx.numpy(), axis=1), "margin": srt[:, self.top_k - 1] - srt[:, self.top_k],
                              "scores": sc}
    return logits, w, idx
G.Glm5NextTextTopkRouter.forward = router
pools = {}
topk0 = torch.Tensor.topk
def topk(t, k, dim=-1, *a, **kw):   # the indexer's pool scores [B, S, pools]: the k-th margin
    r = topk0(t, k, dim, *a, **kw)
    if t.dim() == 3 and t.shape[-1] > k:
        v = torch.sort(t.double(), dim=-1, descending=True).values[0]
        lo = torch.finfo(t.dtype).min
        m = torch.where(v[:, k] > lo, v[:, k - 1] - v[:, k], torch.full_like(v[:, 0], float("inf")))
        pools[state["layer"]] = {"margin": m.numpy(), "kth": v[:, k - 1].numpy()}
    return r
torch.Tensor.topk = topk
ixs = {}
ixf = G.Glm5NextTextIndexer.forward
def indexer(self, *a, **kw):
    r = ixf(self, *a, **kw)
    ixs[state["layer"]] = [sorted(int(x) for x in row if x >= 0) for row in r[0].numpy()]
    return r
G.Glm5NextTextIndexer.forward = indexer
def hooked(x, perm=None):
    name = sys._getframe(1).f_locals["name"]
    up = sys._getframe(2).f_locals
    a = x.detach().float().numpy().reshape(-1, x.shape[-1])
    q, dx = rq.quantize_q8_0(a)
    b = a.reshape(a.shape[0], -1, 32)
    d = (np.abs(b).max(2) / np.float32(127)).astype(np.float32)
    idd = np.where(d != 0, np.float32(1) / np.where(d != 0, d, 1), 0).astype(np.float32)
    v = (b * idd[:, :, None]).astype(np.float32).reshape(a.shape)
    label = next((l for k, l in LABEL if k in name), None)
    layer = None if label == "head" else state["layer"]
    if label is not None:          # q / k / v (gate / up) each round x alike: a flip is in all
        if label.startswith("exp_"):
            toks = up["token_idx"].numpy().tolist(); e = int(up["expert_idx"])
            keys = [(layer, label, t, e if label == "exp_down" else None) for t in toks]
        else:
            keys = [(layer, label, t, None) for t in range(a.shape[0])]
        for fl in flips:
            for i, k in enumerate(keys):
                if k[:3] == fl[:3] and k[3] == fl[4] and fl[5] == "x":
                    q = q.copy(); col = fl[3]; val = v[i, col]
                    q[i, col] += -np.sign(val) if abs(q[i, col]) > abs(val) else np.sign(val)
                elif k[:3] == fl[:3] and k[3] == fl[4]:    # block fl[3]'s f16 scale: its other neighbour
                    dx = dx.copy(); blk = fl[3]; h = np.float16(dx[i, blk])
                    other = np.nextafter(h, np.float16(np.inf) if d[i, blk] > dx[i, blk] else np.float16(0))
                    dx[i, blk] = np.float32(other)
        if not any(k in name for k in SKIP):
            for i, k in enumerate(keys):
                rows[k] = (q[i].copy(), v[i].copy(), dx[i].copy(), d[i].copy())
    y = (q.astype(np.float32).reshape(a.shape[0], -1, 32) * dx[:, :, None]).reshape(a.shape)
    return torch.from_numpy(np.ascontiguousarray(y.reshape(x.shape)))
rq.q8_0 = hooked
with rq.q8_0_activations(model, [], only=q8_params), torch.no_grad():
    lg = model(input_ids=torch.tensor([c["prompt_ids"]]), use_cache=True).logits[0, -1].double()
lp = (lg - torch.logsumexp(lg, 0)).numpy()
top = np.argsort(-lp)[:8]
out.write_bytes(pickle.dumps({"hidden": hidden, "mlp_out": mlp_out, "rows": rows, "routes": routes, "pools": pools, "choices": ixs, "top": [(int(t), float(lp[t])) for t in top], "flip": flip}))
print(case, "flip", flip, "rows", len(rows), "top", [(int(t), round(float(lp[t]), 6)) for t in top[:5]])
