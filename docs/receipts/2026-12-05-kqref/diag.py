import json, numpy as np
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
rec = json.load(open('tests/data/moe/glm4moe-k256.json'))
o = open_model('/tmp/kqref-work/glm4moe-k256/glm4moe-k256-Q4_K_M.gguf', progress=False)
eng = o.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
lc = {c['name']: c for c in rec['llama_cpp']['Q4_K_M']['cases']}
for key in ('Q4_K_M q8_K', 'Q4_K_M'):
  for c in rec['references'][key]['cases']:
    if c['name'] not in ('unicode', 'count'): continue
    eng.apply(BeginStep(0, tuple(range(8))))
    ids = list(c['prompt_ids'])
    worst = []
    for step in range(3):
        chunk = ids if step == 0 else ids[-1:]
        lg = eng.apply(RoundStep((Chunk(0, len(ids) - len(chunk), tuple(chunk), True),)))[0]
        ref = c['top5'][step]
        got = lg[ref['ids']]
        print(key, c['name'], step, 'ref top5', ref['ids'][:3], np.round(ref['logits'][:3], 4), 'ours', np.round(got[:3], 4), 'our argmax', int(np.argmax(lg)), 'lcpp', lc[c['name']]['greedy_ids'][step], 'ref', c['greedy_ids'][step])
        ids.append(c['greedy_ids'][step])
    eng.apply(EndStep(0))
