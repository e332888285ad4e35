import json, time, sys
import numpy as np
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
rec = json.load(open('tests/data/moe/glm4moe-k256.json'))
t=time.time()
o = open_model('/tmp/kqref-work/glm4moe-k256/glm4moe-k256-Q4_K_M.gguf', progress=False)
print('open %.1fs ops %s' % (time.time()-t, o.engine.model.ops.name), flush=True)
ref = {c['name']: c for c in rec['references']['Q4_K_M q8_K']['cases']}
lc = {c['name']: c for c in rec['llama_cpp']['Q4_K_M']['cases']}
def same(a, b):
    n = next((i for i,(x,y) in enumerate(zip(a,b)) if x!=y), None); return len(a) if n is None else n
out = {}
for name, c in ref.items():
    ids = c['prompt_ids']
    t=time.time()
    g = generate(o, ids, SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))
    out[name] = g
    print(f"{name:11s} vs tf-q8K {same(g, c['greedy_ids']):2d}/24  vs llama.cpp {same(g, lc[name]['greedy_ids']):2d}/24  ({time.time()-t:.1f}s)", flush=True)
json.dump(out, open('/tmp/kqref-w/ours_ids.json','w'))
