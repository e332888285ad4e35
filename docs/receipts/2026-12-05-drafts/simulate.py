import json
from server.drafts.ngram import NgramDrafts
from server.drafts.pace import Paced
R = json.load(open("/tmp/replies.json"))
C = 0.44
def run(prompt, reply, make, K=8, fixed=None):
    src = make(prompt)
    out = []; cost = 0.0; rounds=0; drafted=acc=0
    while len(out) < len(reply):
        left = len(reply) - len(out)
        k = min(K, left - 1)
        d = src.propose(out, k) if k > 0 else ()
        cost += 1 + C*len(d); rounds += 1
        a = 0
        while a < len(d) and d[a] == reply[len(out)+a]:
            a += 1
        src.verified(len(d), a)
        drafted += len(d); acc += a
        out = reply[:len(out)+a+1]
    return len(reply)/cost, acc/max(drafted,1), rounds
class Sticky(NgramDrafts):
    """continue from where the last fully taken proposal's source ran"""
    def __init__(s, p): super().__init__(p); s.ptr=None
    def propose(s, out, k):
        if len(out) > s.reply:
            s.toks += out[s.reply:]; s.reply=len(out); s._index()
        if s.ptr is not None and s.ptr < len(s.toks) - 1:
            d = tuple(s.toks[s.ptr:s.ptr+k]); 
            if d: s.last=(s.ptr, len(d)); return d
        t=s.toks
        for n in range(min(4,len(t)),1,-1):
            g=tuple(t[len(t)-n:]); e=s.latest.get(g)
            if e is not None:
                if len(t)-1-e < k: e = s.first[g]
                s.last=(e+1, k); return tuple(t[e+1:e+1+k])
        s.last=None; return ()
    def verified(s, p, a):
        s.ptr = (s.last[0] + a + 1) if (s.last and a == p and p>0) else None
for name,(prompt,reply) in R.items():
    for label, mk in [("ngram paced", lambda p: Paced(NgramDrafts(p), C)),
                      ("sticky paced", lambda p: Paced(Sticky(p), C))] + \
                     [(f"ngram k={k}", (lambda k: lambda p: type("F",(NgramDrafts,),{"propose": lambda s,o,kk: NgramDrafts.propose(s,o,min(kk,k))})(p))(k)) for k in (1,2,3,4,6,8)]:
        sp, a, r = run(prompt, reply, mk)
        print(f"{name:6s} {label:14s} modeled {sp:.2f}x acceptance {a:.2f} rounds {r}")
