"""On a GGUF: the engine's logits for a prompt with the K-quants against int8 x (the cpu
backend's kq8) and against float32 x (kq8 off): relative differences and top-k agreement."""
import sys, time, numpy as np
from pathlib import Path
from bench.moe_cpu import Foldserve
from server.ranks.steps import Chunk, RoundStep
f = Foldserve(Path(sys.argv[1]), 2)
ops = f.eng.model.ops
toks = tuple(int(t) for t in np.random.default_rng(0).integers(0, f.spec.vocab, 64))
out = {}
feed = None                    # the int8 pass's greedy ids, fed to the float pass (teacher-forced)
for kq8 in (True, False):
    type(ops).kq8 = kq8
    f._begin(0)
    lg = f.eng.apply(RoundStep((Chunk(0, 0, toks),)))
    seq = [int(np.argmax(lg[0]))]
    rows = [lg[0].copy()]
    for k in range(8):
        nxt = seq[-1] if feed is None else feed[k]
        lg = f.eng.apply(RoundStep((Chunk(0, 64 + k, (nxt,)),)))
        seq.append(int(np.argmax(lg[0]))); rows.append(lg[0].copy())
    f._end(1)
    out[kq8] = (seq, np.array(rows))
    feed = seq
(sa, la), (sb, lb) = out[True], out[False]
print("greedy ids int8-x:", sa)
print("greedy ids f32-x: ", sb)
for k in range(len(la)):
    a, b = la[k], lb[k]
    ta, tb = np.argsort(-a)[:5], np.argsort(-b)[:5]
    gap = np.sort(b)[-1] - np.sort(b)[-2]
    print(f"step {k}: max|diff| {np.abs(a-b).max():.4f}  logit std {b.std():.3f}  rel rms {np.sqrt(((a-b)**2).mean())/b.std():.4f}  "
          f"top1 same {ta[0]==tb[0]}  top5 overlap {len(set(ta)&set(tb))}  f32 top1-top2 gap {gap:.4f}", flush=True)
