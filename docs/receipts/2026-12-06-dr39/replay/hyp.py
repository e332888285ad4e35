import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
T = R.TR1
for lab, ch in (("TR1", T), ("5 at 1.95", T[:4]+(1.95,)+T[5:]), ("7-9 line", T[:6]+(2.62,2.85,3.0)), ("7-9 line 9=2.95", T[:6]+(2.60,2.78,2.95)), ("attn -10% rows", tuple(1.041 if i==0 else 1+ (c-1)*0.93 for i,c in enumerate(T)))):
    for pl, pt in (("CC", R.CC), ("same", ch)):
        v = {n: R.run(*R.ALL[n], pt, ch)[0] for n in R.SET}
        print(f"{lab:18s} pace {pl:4s} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" set {R.geo(list(v.values())):.3f}")
