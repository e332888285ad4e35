import sys, json, numpy as np, torch
sys.path.insert(0, 'tools/refs')
import record_moe as rm, record_moe_kquant as rk
torch.set_num_threads(2)
rec = json.load(open('tests/data/moe/glm4moe-k256.json'))
model, _ = rm.load_hf(__import__('pathlib').Path('/tmp/kqref-work/glm4moe-k256/hf-Q4_K_M-dequant'))
orig_q8 = rk.q8_k
near = []
def q8(x):
    a = x.detach().float().numpy().reshape(-1, 256)
    idx = np.abs(a).argmax(1); mx = a[np.arange(len(a)), idx]
    isc = np.float32(-127) / np.where(mx == 0, 1, mx).astype(np.float32)
    v = (isc[:, None] * a).astype(np.float32)
    frac = np.abs(v - np.floor(v) - 0.5)
    near.append((float(frac.min()), a.shape[0]))
    return orig_q8(x)
rk.q8_k = q8
margins = []
def hook(mod, inp, out):
    x = inp[0].reshape(-1, 256).float()
    sc = torch.sigmoid(x @ mod.weight.float().T) + mod.e_score_correction_bias.float()
    s = torch.sort(sc, -1, descending=True).values
    margins.append(float((s[:, 3] - s[:, 4]).min()))
for n, m in model.named_modules():
    if n.endswith('mlp.gate'): m.register_forward_hook(hook)
for c in rec['references']['Q4_K_M q8_K']['cases']:
    near.clear(); margins.clear()
    with rk.q8_k_activations(model):
        with torch.no_grad():
            model(input_ids=torch.tensor([c['prompt_ids']]), use_cache=False)
    print(f"{c['name']:11s} len {len(c['prompt_ids']):3d} min |frac-0.5| over q8 inputs {min(f for f,_ in near):.2e}  min router gap (unmasked top4-5) {min(margins):.2e}", flush=True)
