import json, sys, numpy as np
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
name, path = sys.argv[1], sys.argv[2]
rec = json.load(open(f'tests/data/moe/{name}.json'))
o = open_model(path, progress=False)
eng = o.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
for c in rec['references']['Q4_K_M q8_K']['cases']:
    eng.apply(BeginStep(0, tuple(range(8))))
    ids = list(c['prompt_ids']); errs = []
    for step in range(24):
        chunk = ids if step == 0 else ids[-1:]
        lg = eng.apply(RoundStep((Chunk(0, len(ids) - len(chunk), tuple(chunk), True),)))[0]
        ref = c['top5'][step]
        errs.append(float(np.max(np.abs(lg[ref['ids']] - np.array(ref['logits'])))))
        ids.append(c['greedy_ids'][step])      # teacher-forced on the reference's path
    eng.apply(EndStep(0))
    print(f"{c['name']:11s} max|dlogit| per step (teacher-forced):", ' '.join(f'{e:.0e}' for e in errs), flush=True)
