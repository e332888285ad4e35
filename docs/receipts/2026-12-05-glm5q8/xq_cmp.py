"""The first q8_0-rounded inputs where foldserve and the reference part (xq_ours.py, xq_ref.py),
in layer order, with the reference's x / d there (its distance to the rounding tie).
    python3 xq_cmp.py REF.pkl OURS.pkl"""
import pickle, sys
import numpy as np
a, b = (pickle.loads(open(p, "rb").read()) for p in sys.argv[1:3])
print("ref flip", a.get("flip"), "top", a["top"][:3]); print("ours top", b["top"][:3])
ours = dict(b["top"])
print("last row's log-softmax: max |ref - ours| over ref's top 5:", max(abs(v - ours.get(t, 99)) for t, v in a["top"][:5]))
ORDER = ["kda_in", "q_a", "mlp_in", "exp_in", "sh_in", "exp_down", "mlp_down", "sh_down", "head"]
key = lambda k: (99 if k[0] is None else k[0], ORDER.index(k[1]), k[2], -1 if k[3] is None else k[3])
common = sorted(set(a["rows"]) & set(b["rows"]), key=key)
only = (len(set(a["rows"]) - set(b["rows"])), len(set(b["rows"]) - set(a["rows"])))
print(f"rows compared {len(common)}; only in ref / ours: {only}")
for k in sorted(set(b["rows"]) - set(a["rows"]), key=key)[:4]:
    r = a.get("routes", {}).get(k[0])
    if r is not None and k[1] == "exp_down":
        t = k[2]
        print(f"  only ours {k}: the reference routes token {t} of layer {k[0]} to {r['ids'][t].tolist()}, "
              f"its k-th / (k+1)-th biased-score margin {r['margin'][t]:.3e}")
for li in sorted(set(a.get("choices", {})) & set(b.get("choices", {}))):
    ca, cb = a["choices"][li], b["choices"][li]
    d = [r for r in range(min(len(ca), len(cb))) if ca[r] != cb[r]]
    for r in d[:4]:
        pm = a["pools"][li]
        print(f"  layer {li} row {r}: the indexer's choice parts (ref {ca[r]}, ours {cb[r]}); the reference's "
              f"k-th / (k+1)-th pool score margin {pm['margin'][r]:.3e} (k-th score {pm['kth'][r]:.4f})")
first_far = next(((k, float(np.max(np.abs(a["rows"][k][1] - b["rows"][k][1])))) for k in common
                  if np.max(np.abs(a["rows"][k][1] - b["rows"][k][1])) > 1e-3), None)
print("first input row whose x/d differs by over 1e-3 (beyond float32 reordering):", first_far)
for li in sorted(set(a.get("hidden", {})) & set(b.get("hidden", {}))):
    for part in ("mlp_out", "hidden"):
        if li in a.get(part, {}) and li in b.get(part, {}):
            x, y = a[part][li], b[part][li]
            dd = np.abs(x - y).reshape(x.shape[0], -1).max(1) / np.abs(x).reshape(x.shape[0], -1).max(1)
            r = int(np.argmax(dd))
            print(f"  layer {li} {part}: max |ref - ours| / max |ref| {dd[r]:.2e} at row {r}; median {np.median(dd):.2e}")
n = 0
for k in common:
    (qa, va, sa, da), (qb, vb, sb, db) = a["rows"][k], b["rows"][k]
    for blk in np.nonzero(sa != sb)[0][:2]:
        print(f"  {k}: block {blk}: the f16 scale parts: ref {sa[blk]!r} (d = {da[blk]!r}), ours {sb[blk]!r} (d = {db[blk]!r})")
        n += 1
    d = np.nonzero(qa != qb)[0]
    if len(d):
        for col in d[:3]:
            dist = abs(abs(va[col] - np.trunc(va[col])) - 0.5)
            print(f"  {k}: col {col}: ref q {qa[col]} (x/d = {va[col]!r}, {dist:.2e} from the tie), ours q {qb[col]}")
        n += 1
        if n >= 8:
            break
if n == 0:
    print("  every compared row's q equal")
