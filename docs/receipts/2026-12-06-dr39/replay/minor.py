import sys, os
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from vote import *
class Flag(Vote):
    """latest's continuation as main; flags whether its first token is the most common next."""
    def propose(self, out, k):
        d = NG.NgramDrafts.propose(self, out, k)
        self.minor = False
        if d:
            t = self.toks
            for n in range(min(NG.MAX_N, len(t)), NG.MIN_N - 1, -1):
                cs = self.nxt.get(tuple(t[len(t) - n:]))
                if cs:
                    top = max(v[0] for v in cs.values())
                    self.minor = cs[d[0]][0] < top
                    break
        return d
MODE = "own"
class PF(P.Paced):
    def _propose_classed(self, out, k, load):
        d = tuple(self.source.propose(out, k)) if k >= 1 else ()
        if not d:
            self.idle += 1; return ()
        m = self.source.match
        c = (m >= P.LONG) + (m >= P.MID)
        if self.source.minor:
            c = 10 + c if MODE == "own" else (0 if MODE == "down" else 10)
        self._use(c)
        n = self.best(len(d), load)
        if n == 0:
            self.idle += 1
            if self.idle < P.PROBE: return ()
            n = 1
        self.idle = 0
        return d[:n]
def run2(prompt, reply, pt, ch, K=8):
    src = PF(Flag(prompt), cpu_row_cost, pt)
    out, cost = reply[:1], 0.0
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        cost += ch[len(d)]
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]: a += 1
        if d: src.verified(len(d), a)
        out = reply[:len(out) + a + 1]
    return (len(reply) - 1) / cost
import vote
for MODE in ("own", "down", "one"):
    for pt in (R.CC, R.TR1):
        v = {n: run2(*R.ALL[n], pt, R.TR1) for n in R.SET + R.CUTS + R.OTHERS}
        print(f"{MODE:5s} {'CC' if pt is R.CC else 'TR1'} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" | set {R.geo([v[n] for n in R.SET]):.3f} cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
