import json, sys
sys.path.insert(0, ".")
from server.drafts.ngram import NgramDrafts
from server.drafts.pace import Paced
from server.drafts.policy import cpu_row_cost
R = json.load(open("docs/receipts/2026-12-05-drafts-3/replies.json"))
T = {1:1,2:1.59,3:2.17,4:1.91,5:2.52,6:3.04,7:3.67,8:3.50,9:4.14}
class Fill(Paced):
    def best(self, cap, load=(1, 1.0)):
        k = super().best(cap, load)
        if k and (load[0] + k) % 4 == 3 and k + 1 <= cap:
            k += 1
        return k
def run(prompt, reply, cls, true):
    src = cls(NgramDrafts(prompt), cpu_row_cost)
    out=[]; cost=0; rounds=0; dr=acc=0; hist={}
    while len(out) < len(reply):
        src.at(len(prompt)+len(out))
        k = min(8, len(reply)-len(out)-1)
        d = src.propose(out, k) if k > 0 else ()
        hist[len(d)+1] = hist.get(len(d)+1, 0) + 1
        cost += true(1+len(d)); rounds += 1
        a=0
        while a < len(d) and d[a] == reply[len(out)+a]: a+=1
        if d: src.verified(len(d), a)
        dr+=len(d); acc+=a
        out = reply[:len(out)+a+1]
    return f"{len(reply)/cost:.2f}x rounds {rounds} drafted {dr} accepted {acc} rows {dict(sorted(hist.items()))}"
for name,(p,r) in R.items():
    for tname, true in (("table", T.get), ("lin .3", lambda r: 1 + .3*(r-1))):
        print(name, tname, "paced:", run(p, r, Paced, true))
        print(name, tname, "fill: ", run(p, r, Fill, true))
