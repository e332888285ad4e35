import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
import server.drafts.pace as P
for dec in (0.6, 0.7, 0.8, 0.9):
    for probe in (8, 16, 32):
        P.DECAY, P.PROBE = dec, probe
        v = {n: R.run(*R.ALL[n], R.CC, R.TR1)[0] for n in R.SET + R.CUTS + R.OTHERS}
        print(f"decay {dec} probe {probe:2d} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" | set {R.geo([v[n] for n in R.SET]):.3f} cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
