"""One-row rounds' forward ms by the round before them (1 row, or a chunk), junk drafts."""
import sys, os, statistics, json
ROOT=os.getcwd(); sys.path.insert(0,ROOT); sys.path.insert(0,ROOT+'/bench'); sys.path.insert(0,ROOT+'/tests/drafts')
import drafts_profile as P
from editing import editing_prompt
from server.engine.build import open_model
LOGS=[]
orig=P.Timed.__init__
def init(self, inner, log):
    orig(self, inner, log); LOGS.append(log)
P.Timed.__init__=init
m=open_model(None,progress=False); tok=m.tokenizer; prompt=tok.encode(editing_prompt())
P.one(m.engine,prompt,8,True,None,8)
for rep in range(2):
  for junk, d in ((False, False), (True, True), (False, True)):
    LOGS.clear()
    ids,r=P.one(m.engine,prompt,360,d,None,8,junk=junk)
    log=LOGS[-1][-len(ids)+1:] if not d else LOGS[-1][-r['rounds']:]
    after1=[t*1e3 for (a,_),(b,t) in zip(log,log[1:]) if b==1 and a==1]
    afterc=[t*1e3 for (a,_),(b,t) in zip(log,log[1:]) if b==1 and a>1]
    f=lambda v: (len(v), round(statistics.median(v),2) if v else None)
    print(rep, 'junk' if junk else ('drafted' if d else 'plain'), 'one-row after one-row', f(after1), 'after a chunk', f(afterc), os.getloadavg())
