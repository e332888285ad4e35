import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
TR1 = R.TR1
EXT = TR1 + tuple(3.184 + 0.30*(k-9) for k in range(10, 18))
CCX = R.CC + tuple(3.0 + 0.30*(k-9) for k in range(10, 18))
def tab(label, K, pt, ch):
    v = {n: R.run(*R.ALL[n], pt, ch, K=K) for n in R.SET + R.CUTS + R.OTHERS}
    print(f"{label:30s} " + " ".join(f"{v[n][0]:.3f}" for n in R.SET) + f" | set geo {R.geo([v[n][0] for n in R.SET]):.3f} cuts {R.geo([v[n][0] for n in R.CUTS]):.3f} prose {v['prose'][0]:.3f} others {R.geo([v[n][0] for n in R.OTHERS]):.3f}")
    return v
for K in (8, 10, 12, 16):
    tab(f"K{K} pace CCX / EXT", K, CCX, EXT)
    tab(f"K{K} pace EXT / EXT", K, EXT, EXT)
