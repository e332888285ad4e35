import cProfile, pstats, sys, os
sys.argv=['x']
ROOT=os.getcwd(); sys.path.insert(0,ROOT); sys.path.insert(0,ROOT+'/bench'); sys.path.insert(0,ROOT+'/tests/drafts')
import drafts_profile as P
import server.scheduler as S
from editing import editing_prompt
from server.engine.build import open_model
m=open_model(None,progress=False); tok=m.tokenizer; prompt=tok.encode(editing_prompt())
P.one(m.engine,prompt,8,True,None,8)
orig=S.Scheduler._run
PR=[None]
def run(self):
    PR[0].enable()
    try: return orig(self)
    finally: PR[0].disable()
S.Scheduler._run=run
for d in (True, False):
    PR[0]=cProfile.Profile()
    ids,r=P.one(m.engine,prompt,400,d,None,8)
    print("DRAFTED" if d else "PLAIN", r['decode_tps'], r['rounds'], r['stages_ms_per_round'])
    pstats.Stats(PR[0]).sort_stats('tottime').print_stats(30)
