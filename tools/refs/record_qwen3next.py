"""Record the references for the tiny Qwen3-Next checkpoint: tests/data/qwen3next/qwen3next-tiny.json.

    /work/venv-ref/bin/python tools/refs/record_qwen3next.py [--out tests/data/qwen3next]

Needs torch + transformers (a reference venv, not the project's). The checkpoint is written by
tools/refs/next_checkpoint.py (numpy + safetensors; the same bytes in the project's venv,
where the tests regenerate it and compare the sha256 recorded here).

It records:
- `checkpoint`: the config and the sha256 of the files.
- `hf_check`: transformers loads the folder with no missing / unexpected / mismatched keys.
- `references`: transformers float32 (eager attention), greedy N steps from each prompt with
  its cache (the prompt through the chunked gated delta rule, each step through the
  recurrent one), in the golden file's format and rule (prompt_ids, greedy_ids, top5 ids and
  logits a step, near_tie_step, exact_prefix) plus the smallest router margin on the path.
- `routes`: the same prompt's last-position logits through transformers' prompt path
  (chunked) and fed token by token (recurrent): how far its own two routes differ.
- `gdn_case`: one Gated DeltaNet chunk on seeded inputs (kernels/gdn.py's contract) through
  transformers' functions (causal_conv1d_fn, l2norm in the kernel, the recurrent and the
  chunked delta rule, Qwen3NextRMSNormGated): the definition test's reference.
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]


def _writer():
    """tools/refs/next_checkpoint.py by its path: the repository root stays off sys.path, where
    its `kernels` package would hide the `kernels` package transformers imports."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("next_checkpoint", ROOT / "tools/refs/next_checkpoint.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


nc = _writer()

N_STEPS = 24
NEAR_TIE = 2e-3
TOP = 5
RULE = ("An implementation must produce the greedy continuation greedy_ids for the first "
        "exact_prefix tokens (through the first step whose top1-top2 logit margin in the "
        "reference is under 2e-3, a near-tie where summation order may pick either). top5 holds "
        "the reference's five best ids and logits at each greedy step.")
PROMPTS = [
    {"name": "short", "prompt_ids": [5, 17, 99, 3, 250, 41, 7, 7, 300, 12]},
    {"name": "medium", "prompt_ids": [(i * 37 + 11) % 509 + 3 for i in range(33)]},
    {"name": "long", "prompt_ids": [(i * i * 13 + 7 * i + 5) % 500 + 3 for i in range(80)]},
]
# the definition case: one chunk of n positions, this many heads and dims
GDN_CASE = {"seed": 7, "n": 12, "nk": 2, "nv": 4, "dk": 8, "dv": 8, "K": 4, "eps": 1e-6}


def gdn_inputs(c: dict) -> dict:
    """The definition case's inputs, from numpy's seeded generator (the test makes the same)."""
    rng = np.random.default_rng(c["seed"])
    n, nk, nv, dk, dv, K = c["n"], c["nk"], c["nv"], c["dk"], c["dv"], c["K"]
    C = 2 * nk * dk + nv * dv
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {"mix": f(n, C), "z": f(n, nv * dv), "b": f(n, nv), "a": f(n, nv),
            "conv_w": (f(C, K) * 0.5).astype(np.float32),
            "A_log": np.log(rng.uniform(0.5, 4.0, nv)).astype(np.float32),
            "dt_bias": (1 + 0.3 * f(nv)).astype(np.float32),
            "norm_w": (1 + 0.1 * f(dv)).astype(np.float32)}


@torch.no_grad()
def gdn_reference(c: dict) -> dict:
    from transformers.models.qwen3_next import modeling_qwen3_next as M
    x = {k: torch.from_numpy(v) for k, v in gdn_inputs(c).items()}
    n, nk, nv, dk, dv = c["n"], c["nk"], c["nv"], c["dk"], c["dv"]
    y = M.causal_conv1d_fn(x["mix"].T[None].contiguous(), x["conv_w"], None, activation="silu")[0].T
    q = y[:, :nk * dk].reshape(1, n, nk, dk)
    k = y[:, nk * dk:2 * nk * dk].reshape(1, n, nk, dk)
    v = y[:, 2 * nk * dk:].reshape(1, n, nv, dv)
    beta = x["b"].sigmoid()[None]
    g = (-x["A_log"].float().exp() * torch.nn.functional.softplus(x["a"] + x["dt_bias"]))[None]
    norm = M.Qwen3NextRMSNormGated(dv, eps=c["eps"])
    norm.weight.copy_(x["norm_w"])
    out = {}
    for route, fn in (("recurrent", M.torch_recurrent_gated_delta_rule),
                      ("chunked", M.torch_chunk_gated_delta_rule)):
        o, S = fn(q, k, v, g=g, beta=beta, initial_state=None, output_final_state=True,
                  use_qk_l2norm_in_kernel=True)
        o = norm(o.reshape(-1, dv), x["z"].reshape(-1, dv)).reshape(n, nv * dv)
        out[route] = {"out": o.flatten().tolist(), "state": S[0].flatten().tolist()}
    ro, co = np.array(out["recurrent"]["out"]), np.array(out["chunked"]["out"])
    out["chunked_vs_recurrent_max_abs"] = float(np.max(np.abs(ro - co)))
    out["chunked_vs_recurrent_bytes_equal"] = bool(np.array_equal(ro.astype(np.float32), co.astype(np.float32)))
    return out


def load_hf(d: Path):
    from transformers import AutoModelForCausalLM
    m, info = AutoModelForCausalLM.from_pretrained(str(d), dtype=torch.float32,
                                                   output_loading_info=True,
                                                   attn_implementation="eager")
    m.eval()
    return m, {k: sorted(map(str, v)) if isinstance(v, (set, list)) else str(v) for k, v in info.items()}


def _top(logits: np.ndarray):
    ids = np.argsort(-logits, kind="stable")[:TOP]
    return [int(i) for i in ids], [float(logits[i]) for i in ids]


def _cache_of(out):
    return getattr(out, "past_key_values", None) or getattr(out, "cache", None)


@torch.no_grad()
def greedy_hf(model, prompt_ids, n):
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
    cache = _cache_of(out)
    greedy, top5 = [], []
    for _ in range(n):
        ids, vals = _top(out.logits[0, -1].float().numpy())
        top5.append({"ids": ids, "logits": vals})
        greedy.append(ids[0])
        out = model(input_ids=torch.tensor([[ids[0]]]), cache=cache, use_cache=True)
        cache = _cache_of(out)
    return greedy, top5


@torch.no_grad()
def token_by_token(model, prompt_ids):
    """The prompt fed one token at a time through the cache: the last position's logits."""
    out = model(input_ids=torch.tensor([prompt_ids[:1]]), use_cache=True)
    cache = _cache_of(out)
    for t in prompt_ids[1:]:
        out = model(input_ids=torch.tensor([[t]]), cache=cache, use_cache=True)
        cache = _cache_of(out)
    return out.logits[0, -1].float().numpy()


@torch.no_grad()
def router_margin(model, ids) -> float:
    """The smallest p[k-1] - p[k] of the sorted router softmax over every layer and position."""
    found, k = [], nc.CONFIG["num_experts_per_tok"]

    def hook(mod, inp, _out):
        x = inp[0].reshape(-1, nc.CONFIG["hidden_size"]).float()
        s = torch.sort(torch.softmax(x @ mod.weight.float().T, -1), -1, descending=True).values
        found.append(float((s[:, k - 1] - s[:, k]).min()))

    hs = [m.register_forward_hook(hook) for name, m in model.named_modules() if name.endswith("mlp.gate")]
    try:
        model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for h in hs:
            h.remove()
    return min(found)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests/data/qwen3next"))
    a = ap.parse_args(argv)
    import transformers
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as t:
        d = Path(t) / "hf"
        sha = nc.write(d)
        model, info = load_hf(d)
        problems = {k: v for k, v in info.items() if v}
        cases, routes = [], []
        for p in PROMPTS:
            greedy, top5 = greedy_hf(model, p["prompt_ids"], N_STEPS)
            margins = [s["logits"][0] - s["logits"][1] for s in top5]
            tie = next((i for i, m in enumerate(margins) if m < NEAR_TIE), None)
            cases.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "greedy_ids": greedy,
                          "top5": top5, "near_tie_step": tie,
                          "exact_prefix": N_STEPS if tie is None else tie + 1,
                          "min_top1_margin": float(min(margins)),
                          "router_margin": router_margin(model, p["prompt_ids"] + greedy[:-1])})
            with torch.no_grad():
                whole = model(input_ids=torch.tensor([p["prompt_ids"]]), use_cache=True).logits[0, -1].numpy()
            step = token_by_token(model, p["prompt_ids"])
            routes.append({"name": p["name"], "max_abs_logit_diff": float(np.max(np.abs(whole - step))),
                           "bytes_equal": bool(np.array_equal(whole, step))})
    rec = {
        "rule": RULE,
        "made_with": {"script": "tools/refs/record_qwen3next.py", "python": platform.python_version(),
                      "torch": torch.__version__, "transformers": transformers.__version__,
                      "numpy": np.__version__, "machine": platform.machine()},
        "checkpoint": {"name": nc.NAME, "config": nc.CONFIG, "sha256": {f"hf/{k}": v for k, v in sha.items()}},
        "hf_check": {"class": type(model).__name__, "loading_problems": problems},
        "references": {"dtype": "float32", "attn_implementation": "eager", "n_steps": N_STEPS,
                       "cases": cases},
        "routes": routes,
        "gdn_case": {"params": GDN_CASE, **gdn_reference(GDN_CASE)},
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{nc.NAME}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(path, {c["name"]: (c["exact_prefix"], round(c["min_top1_margin"], 4)) for c in cases},
          routes, rec["gdn_case"]["chunked_vs_recurrent_max_abs"], problems)


if __name__ == "__main__":
    main()
