"""Forward ms by verify-chunk rows in the scheduler's own rounds: a source proposing 0..8
junk drafts in turn (all rejected; reply unchanged), the editing request, in process."""
import sys, os, json, statistics
ROOT=os.getcwd(); sys.path.insert(0,ROOT); sys.path.insert(0,ROOT+'/bench'); sys.path.insert(0,ROOT+'/tests/drafts')
import drafts_profile as P
import server.scheduler as S
from editing import editing_prompt
from server.engine.build import open_model
class Cyc:
    def __init__(self, *a): self.i = 0
    def propose(self, out, k, ctx=None):
        n = self.i % 9; self.i += 1
        return (0,) * min(n, k)
    def verified(self, p, a): pass
    def at(self, *a): pass
    def expect(self, k): return 1.0
S.Paced = Cyc
m=open_model(None,progress=False); tok=m.tokenizer; prompt=tok.encode(editing_prompt())
P.one(m.engine,prompt,8,True,None,8)
res=[]
for rep in range(2):
    ids,r=P.one(m.engine,prompt,360,True,None,8)
    fb=r['forward_ms_by_rows']; b=fb[1]['median']
    print(rep, os.getloadavg(), {k:(v['n'], round(v['median'],2), round(v['median']/b,3)) for k,v in fb.items()})
    res.append(fb)
json.dump(res, open(sys.argv[1],'w'), indent=1)
