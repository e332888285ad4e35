import sys, os
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
from server.drafts.ngram import NgramDrafts
TR1 = R.TR1
def oracle(prompt, reply, ch, K=8):
    src = NgramDrafts(prompt)
    out, cost = reply[:1], 0.0
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        d = src.propose(out, k) if k > 0 else ()
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        # best n <= len(d): tokens min(n,a)+1 at cost ch[n]
        best = max(range(0, len(d)+1), key=lambda n: (min(n,a)+1)/ch[n])
        n = best
        cost += ch[n]
        out = reply[:len(out) + min(n,a) + 1]
    return (len(reply)-1)/cost
v = {n: oracle(*R.ALL[n], TR1) for n in R.SET}
print("oracle TR1", {n: round(x,3) for n,x in v.items()}, "geo", round(R.geo(list(v.values())),3))
