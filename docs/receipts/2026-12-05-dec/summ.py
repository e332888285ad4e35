import re, sys
cur=None; grab=False
for ln in open(sys.argv[1]):
    if ln.startswith('== round'): cur=ln.split()[2:4]+['load '+ln.split('load')[1].split()[0]]; d={}
    m=re.match(r'decode b1: ([\d.]+) ms a step .* on ([\d.]+) cores',ln)
    if m: d['step']=float(m[1]); d['cores']=m[2]; grab=True; continue
    if ln.startswith('prefill'):
        grab=False
        h=d.get('head (Q8_0)',0)/2
        print(' '.join(cur), '| step',d['step'],'cores',d['cores'],'| head',round(h,2),'| rest',round(d['step']-h,2),'| moe',d.get('ops.moe'),'F32 router',d.get('ops.linear (F32, 256 rows)'),'gdn',d.get('ops.gdn_round'),'add_norm',d.get('ops.add_norm'),'python',d.get('other (Python between the ops)'))
    if cur and grab:
        m=re.match(r'\s+(.+?)\s+([\d.]+) ms',ln)
        if m: d.setdefault(m[1].strip(),float(m[2]))
