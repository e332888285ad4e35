import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
import server.drafts.pace as P
from server.drafts.ngram import NgramDrafts
from server.drafts.policy import cpu_row_cost

class Two(P.Paced):
    PRIOR1 = (1.0, 2.0); PRIOR2 = (2.0, 3.0); D1 = 0.8; D2 = 0.8
    def __init__(s, *a, **k):
        super().__init__(*a, **k)
        s.t1, s.n1 = s.PRIOR1; s.t2, s.n2 = s.PRIOR2; s.rec2 = {}
    def _use(s, cls):
        if cls != s.cls:
            s.rec2[s.cls] = (s.t1, s.n1, s.t2, s.n2)
            s.t1, s.n1, s.t2, s.n2 = s.rec2.pop(cls, s.PRIOR1 + s.PRIOR2)
            s.cls = cls
    @property
    def rate(s):
        return s.t1 / s.n1
    def expect(s, k):
        if k == 0: return 1.0
        a1 = min(s.t1 / s.n1, 0.999); a = min(s.t2 / s.n2, 0.999)
        return 1 + a1 * (1 - a ** k) / (1 - a)
    def verified(s, proposed, accepted):
        s.source.verified(proposed, accepted)
        s.t1 = s.t1 * s.D1 + (accepted >= 1); s.n1 = s.n1 * s.D1 + 1
        if accepted >= 1 and proposed >= 2:
            s.t2 = s.t2 * s.D2 + accepted - 1
            s.n2 = s.n2 * s.D2 + accepted - 1 + (accepted < proposed)

def run(cls, prompt, reply, pt, ch, K=8):
    src = cls(NgramDrafts(prompt), cpu_row_cost, pt)
    out, cost = reply[:1], 0.0
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        cost += ch[len(d)]
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d: src.verified(len(d), a)
        out = reply[:len(out) + a + 1]
    return (len(reply) - 1) / cost
def tab(label, cls, pt=R.CC, ch=R.TR1):
    v = {n: run(cls, *R.ALL[n], pt, ch) for n in R.SET + R.CUTS + R.OTHERS}
    print(f"{label:34s} " + " ".join(f"{v[n][0] if isinstance(v[n],tuple) else v[n]:.3f}" for n in R.SET) + f" | set {R.geo([v[n] for n in R.SET]):.3f} cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
if __name__ == "__main__":
    tab("main", P.Paced)
    tab("main pace TR1", P.Paced, R.TR1)
    for p2 in ((1.0,2.0),(2.0,3.0),(3.0,4.0)):
        for d in (0.8, 0.9):
            Two.PRIOR2 = p2; Two.D2 = d
            tab(f"two p2 {p2} d2 {d}", Two)
            tab(f"two p2 {p2} d2 {d} TR1", Two, R.TR1)
