import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minor import *
import minor
B = (4, 8, 16)
class PC(minor.PF):
    def _propose_classed(self, out, k, load):
        d = tuple(self.source.propose(out, k)) if k >= 1 else ()
        if not d:
            self.idle += 1; return ()
        m = self.source.match
        c = sum(m >= b for b in B)
        if FLAG and self.source.minor: c = 10 + c
        self._use(c)
        n = self.best(len(d), load)
        if n == 0:
            self.idle += 1
            if self.idle < P.PROBE: return ()
            n = 1
        self.idle = 0
        return d[:n]
minor.PF = PC
for FLAG in (False, True):
    for B in ((4, 8), (4, 8, 16), (4, 8, 12), (3, 4, 8, 16), (4, 6, 8, 16)):
        for pt in (R.CC, R.TR1):
            v = {n: run2(*R.ALL[n], pt, R.TR1) for n in R.SET + R.CUTS + R.OTHERS}
            print(f"flag {FLAG:d} {str(B):14s} {'CC' if pt is R.CC else 'TR1'} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" | set {R.geo([v[n] for n in R.SET]):.3f} cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
