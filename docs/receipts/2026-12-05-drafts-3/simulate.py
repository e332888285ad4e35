import json, sys
sys.path.insert(0, ".")
from server.drafts.ngram import NgramDrafts
from server.drafts.pace import Paced
from server.drafts.policy import cpu_row_cost
R = json.load(open("docs/receipts/2026-12-05-drafts-3/replies.json"))
# measured one-stream chunk cost in one-row rounds (verify_sizes_before.json), rows 1..17
T = {1:1,2:1.59,3:2.17,4:1.91,5:2.52,6:3.04,7:3.67,8:3.50,9:4.14,12:4.99,16:6.66,17:7.52}
def true(r, lin=None):
    if lin is not None: return 1 + lin*(r-1)
    if r in T: return T[r]
    lo = max(k for k in T if k < r); hi = min(k for k in T if k > r)
    return T[lo] + (T[hi]-T[lo])*(r-lo)/(hi-lo)
def run(prompt, reply, pace_cost, K=8, lin=None, table=None):
    src = Paced(NgramDrafts(prompt), pace_cost)
    if table: src.table = table
    out=[]; cost=0; rounds=0; dr=acc=0
    while len(out) < len(reply):
        src.at(len(prompt)+len(out))
        k = min(K, len(reply)-len(out)-1)
        d = src.propose(out, k) if k > 0 else ()
        cost += true(1+len(d), lin); rounds += 1
        a=0
        while a < len(d) and d[a] == reply[len(out)+a]: a+=1
        if d: src.verified(len(d), a)
        dr+=len(d); acc+=a
        out = reply[:len(out)+a+1]
    return len(reply)/cost, rounds, dr, acc
for name,(p,r) in R.items():
    for lin in (None, 0.37, 0.30, 0.20, 0.15):
        for label, pc in (("pace cpu(keys)", cpu_row_cost), ("pace 0.37", 0.37), ("pace 0.30", 0.30), ("pace 0.2", 0.2)):
            for K in (8, 16):
                sp, rounds, dr, acc = run(p, r, pc, K, lin)
                print(f"{name:5s} true={'table' if lin is None else lin} {label:15s} K={K:2d}: {sp:.2f}x rounds {rounds} drafted {dr} acc {acc}")
print("--- pace using the staircase table")
class TP(Paced):
    def best(self, cap, load=(1, 1.0)):
        best, gain = 0, 1.0
        for k in range(1, cap + 1):
            g = self.expect(k) / true(k + 1)
            if g > gain: best, gain = k, g
        return best
def run2(prompt, reply, K=8, lin=None):
    src = TP(NgramDrafts(prompt), 0.3)
    out=[]; cost=0; rounds=0; dr=acc=0
    while len(out) < len(reply):
        k = min(K, len(reply)-len(out)-1)
        d = src.propose(out, k) if k > 0 else ()
        cost += true(1+len(d), lin); rounds += 1
        a=0
        while a < len(d) and d[a] == reply[len(out)+a]: a+=1
        if d: src.verified(len(d), a)
        dr+=len(d); acc+=a
        out = reply[:len(out)+a+1]
    return len(reply)/cost, rounds, dr, acc
for name,(p,r) in R.items():
    for K in (8, 16):
        print(name, K, run2(p, r, K))
