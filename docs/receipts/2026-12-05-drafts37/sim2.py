import sys, math, json
sys.path.insert(0,'.'); sys.argv=['x']
import importlib.util
src=open('docs/receipts/2026-12-05-drafts36/simulate.py').read().split('names = list(R)')[0]
exec(src)
TN = (1.0, 1.29, 1.53, 1.78, 2.15, 2.45, 2.75, 3.0, 3.21)   # today, quiet-ish: 2,4,5,9 measured; 3,6,7,8 interpolated
TC = (1.0, 1.08, 1.27, 1.46, 1.65, 1.86, 2.35, 2.44, 2.80)  # today under contention (Cyc)
names=list(R)
for tn,T in (("Tnow",TN),("Tcont",TC),("Tp",TP)):
  for lab,chunk in (("pace Tp",TP),("pace Tnow",TN),("pace Tcont",TC)):
    v=[run(*R[n],T,True,chunk) for n in names]; sp=[x[0] for x in v]
    ge=math.exp(sum(math.log(x) for n,x in zip(names,sp) if n.startswith("edit"))/5)
    go=math.exp(sum(math.log(x) for n,x in zip(names,sp) if not n.startswith("edit"))/9)
    print(tn, lab, f"edit {sp[0]:.3f}  geo edits {ge:.3f} others {go:.3f}", v[0][1:])
