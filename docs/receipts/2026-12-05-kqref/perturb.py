import sys, json, numpy as np, torch
sys.path.insert(0, 'tools/refs')
import record_moe as rm, record_moe_kquant as rk
from pathlib import Path
torch.set_num_threads(2)
rec = json.load(open('tests/data/moe/glm4moe-k256.json'))
model, _ = rm.load_hf(Path('/tmp/kqref-work/glm4moe-k256/hf-Q4_K_M-dequant'))
orig_q8 = rk.q8_k
rng = np.random.default_rng(0)
def q8_perturbed(x):
    a = x.detach().float().numpy()
    # one ulp of float32 up or down at random on every element (np.nextafter)
    s = rng.integers(0, 2, a.shape).astype(bool)
    b = np.where(s, np.nextafter(a, np.float32(np.inf)), np.nextafter(a, np.float32(-np.inf))).astype(np.float32)
    return orig_q8(torch.from_numpy(b))
for c in rec['references']['Q4_K_M q8_K']['cases']:
    if c['name'] not in ('unicode', 'count', 'capital'): continue
    ids = c['prompt_ids']; ref = c['top5'][0]
    res = []
    for trial in range(4):
        rk.q8_k = q8_perturbed if trial else orig_q8
        with rk.q8_k_activations(model), torch.no_grad():
            lg = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0, -1].numpy()
        res.append(np.round(lg[ref['ids'][:3]], 4).tolist())
    print(c['name'], 'unperturbed', res[0], '1-ulp perturbed inputs', res[1:], flush=True)
