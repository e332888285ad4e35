import json, sys
sys.path.insert(0, ".")
from server.drafts.ngram import NgramDrafts
from server.drafts.pace import Paced
from server.drafts.policy import cpu_row_cost
R = json.load(open("docs/receipts/2026-12-05-drafts-3/replies.json"))
T = {1:1,2:1.59,3:2.17,4:1.91,5:2.52,6:3.04,7:3.67,8:3.50,9:4.14}
def lin(c): return lambda r: 1 + c*(r-1)
def run(prompt, reply, pc, true, K=8):
    src = Paced(NgramDrafts(prompt), pc)
    out=[]; cost=0; rounds=0; dr=acc=0
    while len(out) < len(reply):
        src.at(len(prompt)+len(out))
        k = min(K, len(reply)-len(out)-1)
        d = src.propose(out, k) if k > 0 else ()
        cost += true(1+len(d)); rounds += 1
        a=0
        while a < len(d) and d[a] == reply[len(out)+a]: a+=1
        if d: src.verified(len(d), a)
        dr+=len(d); acc+=a
        out = reply[:len(out)+a+1]
    return f"{len(reply)/cost:.2f}x rounds {rounds} drafted {dr} accepted {acc}"
def plain(keys): return cpu_row_cost(keys)
for name,(p,r) in R.items():
    for tname, true in (("measured table", T.get), ("linear 0.30", lin(0.30)), ("linear 0.20", lin(0.20))):
        print(f"{name:5s} true cost {tname:14s} pace without loose rows: {run(p, r, plain, true)}")
        print(f"{name:5s} true cost {tname:14s} pace with loose rows:    {run(p, r, cpu_row_cost, true)}")
