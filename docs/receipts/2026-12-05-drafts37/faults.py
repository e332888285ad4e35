import sys, os, resource
ROOT=os.getcwd(); sys.path.insert(0,ROOT); sys.path.insert(0,ROOT+'/bench'); sys.path.insert(0,ROOT+'/tests/drafts')
import drafts_profile as P
from editing import editing_prompt
from server.engine.build import open_model
m=open_model(None,progress=False); tok=m.tokenizer; prompt=tok.encode(editing_prompt())
P.one(m.engine,prompt,8,True,None,8)
for d in (True, False, True):
    r0=resource.getrusage(resource.RUSAGE_SELF)
    ids,r=P.one(m.engine,prompt,400,d,None,8)
    r1=resource.getrusage(resource.RUSAGE_SELF)
    print(d, r['rounds'], 'minflt', r1.ru_minflt-r0.ru_minflt, 'per round', (r1.ru_minflt-r0.ru_minflt)/r['rounds'], 'nvcsw', r1.ru_nvcsw-r0.ru_nvcsw, 'nivcsw', r1.ru_nivcsw-r0.ru_nivcsw)
