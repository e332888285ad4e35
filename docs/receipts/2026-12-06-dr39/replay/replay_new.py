import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
import json
D = "docs/receipts/2026-12-06-dr39"
f = [json.load(open(f"{D}/halve_ab-{i}.json"))["medians_ms"] for i in (1, 2)]
fac = [sum(x[str(k)]["halve"] / x[str(k)]["main"] for x in f) / 2 for k in range(1, 10)]
# the rows' cost beyond the one-row round scaled; the one-row round (no split) kept
T = R.TR1
NEW = (T[0],) + tuple(1 + (T[k] - 1) * 1.0 if False else T[k] * fac[k] / fac[0] for k in range(1, 9))
print("halve/main by rows:", " ".join(f"{x:.3f}" for x in fac))
print("TR1 ", " ".join(f"{x:.3f}" for x in T))
print("TR1h", " ".join(f"{x:.3f}" for x in NEW))
for lab, ch in (("TR1", T), ("TR1 x halve", NEW)):
    v = {n: R.run(*R.ALL[n], R.CC, ch)[0] for n in R.SET}
    print(f"{lab:12s} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" set geo {R.geo(list(v.values())):.3f}")
for lab, pt in (("pace CC / TR1 x halve", R.CC), ("pace TR1 x halve / same", NEW)):
    v = {n: R.run(*R.ALL[n], pt, NEW)[0] for n in R.SET + R.CUTS + R.OTHERS}
    print(f"{lab:24s} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" set geo {R.geo([v[n] for n in R.SET]):.3f}"
          f" cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
