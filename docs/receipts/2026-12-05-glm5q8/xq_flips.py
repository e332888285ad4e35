"""Turn, in the reference, the q8_0 roundings where foldserve parts from it, earliest product
first, until the two agree or a difference is no near tie: each pass runs xq_ref.py with the
flips so far, finds the first (layer, product) whose rounded inputs part from foldserve's
(xq_ours.py's file) and adds every parting value within TIE of its rounding tie (and every
parting f16 scale) of that product. Prints each pass.
    python3 xq_flips.py CASE OURS.pkl WORK [MAX_PASSES]"""
import pickle, subprocess, sys
from pathlib import Path
import numpy as np
case, ours_p, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
passes = int(sys.argv[4]) if len(sys.argv) > 4 else 8
TIE = 1e-4
here = Path(__file__).resolve().parent
b = pickle.loads(Path(ours_p).read_bytes())
ORDER = ["kda_in", "q_a", "mlp_in", "exp_in", "sh_in", "exp_down", "mlp_down", "sh_down", "head"]
key = lambda k: (99 if k[0] is None else k[0], ORDER.index(k[1]), k[2], -1 if k[3] is None else k[3])
flips = []
for n in range(passes + 1):
    out = work / f"xq-ref-{case}-pass{n}.pkl"
    subprocess.run(["/work/venv-ref/bin/python", str(here / "xq_ref.py"), case, str(out)] + flips,
                   check=True, capture_output=True)
    a = pickle.loads(out.read_bytes())
    ours = dict(b["top"])
    dl = max(abs(v - ours.get(t, 99)) for t, v in a["top"][:5])
    found, where = [], None
    for k in sorted(set(a["rows"]) & set(b["rows"]), key=key):
        (qa, va, sa, da), (qb, vb, sb, db) = a["rows"][k], b["rows"][k]
        if where is not None and k[:2] != where:
            break
        e = "-" if k[3] is None else str(k[3])
        for blk in np.nonzero(sa != sb)[0]:
            found.append((f"{k[0]},{k[1]},{k[2]},{blk},{e},d", f"scale d {da[blk]!r} (ours {db[blk]!r}) -> f16 {sa[blk]!r} / {sb[blk]!r}"))
            where = k[:2]
        for col in np.nonzero(qa != qb)[0]:
            dist = abs(abs(float(va[col]) - np.trunc(float(va[col]))) - 0.5)
            found.append((f"{k[0]},{k[1]},{k[2]},{col},{e}", f"x/d {va[col]!r} ({dist:.2e} from the tie; ours {vb[col]!r})", dist))
            where = k[:2]
    print(f"pass {n}: {len(flips)} flips; last row's top-5 max |dlogprob| {dl:.2e}; first parting product {where}", flush=True)
    new = [f for f in found if len(f) == 2 or f[2] < TIE]
    for f in found:
        print("   ", f[0], f[1], "(turned)" if f in new else "(NOT a near tie)")
    if not found or len(new) < len(found):
        break
    flips += [f[0] for f in new]
print("flips:", " ".join(flips))
