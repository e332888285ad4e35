"""Teacher-forced step logits of the k256 records' Q4_K_M files against their "Q4_K_M q8_K"
reference (2026-12-05-kqref's diag_q.py, the files built in-process), and free-running greedy
agreement: PYTHONPATH=TREE python diag.py"""
import json, numpy as np
import kernels; kernels.init()
from tools.refs import moe_checkpoint as mc
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
for name in ("glm4moe-k256", "qwen3moe-k256"):
    rec = json.load(open(f'tests/data/moe/{name}.json'))
    b = mc.build_once(name, ("Q4_K_M",), hf=False)
    o = open_model(str(b.gguf["Q4_K_M"]), progress=False)
    eng = o.engine
    for c in rec['references']['Q4_K_M q8_K']['cases']:
        g = generate(o, c['prompt_ids'], SamplingParams(max_tokens=24, temperature=0.0, ignore_eos=True))
        same = next((i for i, (x, y) in enumerate(zip(g, c['greedy_ids'])) if x != y), 24)
        lc = {d['name']: d for d in rec['llama_cpp']['Q4_K_M']['cases']}[c['name']]['greedy_ids']
        same_lc = next((i for i, (x, y) in enumerate(zip(g, lc)) if x != y), 24)
        eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
        eng.apply(BeginStep(0, tuple(range(8))))
        ids = list(c['prompt_ids']); errs = []
        for step in range(24):
            chunk = ids if step == 0 else ids[-1:]
            lg = eng.apply(RoundStep((Chunk(0, len(ids) - len(chunk), tuple(chunk), True),)))[0]
            ref = c['top5'][step]
            errs.append(float(np.max(np.abs(lg[ref['ids']] - np.array(ref['logits'])))))
            ids.append(c['greedy_ids'][step])
        eng.apply(EndStep(0))
        first = next((i for i, e in enumerate(errs) if e > 1e-3), None)
        print(f"{name} {c['name']:11s} greedy {same:2d}/24 (exact_prefix {c['exact_prefix']}), vs llama.cpp {same_lc:2d}/24; teacher-forced "
              f"max|dlogit| <= {max(errs[:first] or [0]):.0e} through step {(first if first is not None else 24) - 1}, "
              f"then {' '.join(f'{e:.2f}' for e in errs[first:first + 4]) if first is not None else '-'}", flush=True)
