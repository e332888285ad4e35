"""Record the Kimi-Linear references: tests/data/kimi_linear/kda-case.json and
kimi-linear-tiny.json.

    /work/venv-ref/bin/python tools/refs/record_kimi_linear.py [--out tests/data/kimi_linear]

Needs torch + transformers (a reference venv, not the project's). The inputs and the
checkpoint come from tools/refs/kimi_checkpoint.py (numpy + safetensors; the same bytes in
the project's venv, where the tests regenerate them and compare the sha256 recorded here).

`kda-case.json`: each case of kimi_checkpoint.KDA_CASES (kernels/kda.py's contract) through
transformers' own functions: `causal_conv1d_fn` (silu), the forget gate module
(`KimiLinearForgetGate`, or `Glm5NextTextForgetGate` with its `safe_gate_lower_bound` for a
case with a lower bound; their f_a / f_b projections set to identity so f is fed as is),
`recurrent_kimi_delta_attention` and `chunk_kimi_delta_attention` (l2norm in the kernel),
`KimiLinearRMSNormGated`: out and final state by each route, and how far the two routes are.

`kimi-linear-tiny.json`, as tools/refs/record_qwen3next.py's file (its functions reused):
- `checkpoint`: the config and the sha256 of the files;
- `hf_check`: transformers loads the folder with no missing / unexpected / mismatched keys;
- `references`: transformers float32 (eager attention), greedy N steps from each prompt with
  its cache (the prompt through the chunked KDA, each step through the recurrent one), in the
  golden file's format and rule, plus the smallest router margin on the path (the gap between
  the k-th and (k+1)-th expert's selection score among the kept groups);
- `routes`: the prompt's last logits through transformers' prompt path and token by token;
- `gguf`: the F32 GGUF of the same weights (kimi_checkpoint.write_gguf: the gguf package under
  llama.cpp's names and keys; its converter at this commit refuses the folder transformers
  saves), its sha256, and `llama_cpp`: llama-server's greedy ids and top-5 logprobs on it
  (tools/refs/record_moe.py's llama_server_cases: token-id prompts through /completion, F32
  KV), with how far they follow transformers' ids; and `converter`: llama.cpp's own
  convert_hf_to_gguf.py run on the folder through a thin wrapper (CONVERT_WRAPPER: the dense
  MLP's saved names, the tokenizer's unlisted pre-tokenizer hash; the config given Moonshot's
  `linear_attn_config` and `first_k_dense_replace`), its tensors and keys compared with ours.
"""
from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]


def _by_path(name: str):
    """A tools/refs module by its path: the repository root stays off sys.path, where its
    `kernels` package would hide the `kernels` package transformers imports."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / f"tools/refs/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


kc = _by_path("kimi_checkpoint")
rq = _by_path("record_qwen3next")        # load_hf, greedy_hf, token_by_token, RULE, PROMPTS


@torch.no_grad()
def kda_reference(c: dict) -> dict:
    from transformers.models.glm5_next import modeling_glm5_next as G
    from transformers.models.kimi_linear import modeling_kimi_linear as M
    x = {k: torch.from_numpy(v) for k, v in kc.kda_inputs(c).items()}
    n, H, D = c["n"], c["H"], c["D"]
    y = M.causal_conv1d_fn(x["mix"].T[None].contiguous(), x["conv_w"], None, activation="silu")[0].T
    q = y[:, :H * D].reshape(1, n, H, D)
    k = y[:, H * D:2 * H * D].reshape(1, n, H, D)
    v = y[:, 2 * H * D:].reshape(1, n, H, D)
    cfg = SimpleNamespace(linear_head_dim=D, linear_num_heads=H, hidden_size=D,
                          linear_lower_bound=c["lower_bound"])
    if c["lower_bound"] is None:
        gate_mod = M.KimiLinearForgetGate(cfg)
        gate_mod.A_log.copy_(x["A_log"].view(1, 1, H, 1))
    else:
        gate_mod = G.Glm5NextTextForgetGate(cfg)
        gate_mod.A_log.copy_(x["A_log"])
    gate_mod.dt_bias.copy_(x["dt_bias"])
    gate_mod.f_a_proj = torch.nn.Identity()
    gate_mod.f_b_proj = torch.nn.Identity()
    g = gate_mod(x["f"][None])                                       # [1, n, H, D]
    beta = x["b"].sigmoid()[None]
    norm = M.KimiLinearRMSNormGated(D, eps=c["eps"])
    norm.weight.copy_(x["norm_w"])
    out = {"g": g[0].flatten().tolist()}
    for route, fn in (("recurrent", M.recurrent_kimi_delta_attention),
                      ("chunked", M.chunk_kimi_delta_attention)):
        o, S = fn(q, k, v, g=g, beta=beta, initial_state=None, output_final_state=True,
                  use_qk_l2norm_in_kernel=True)
        o = norm(o.reshape(n, H, D), x["gate"].reshape(n, H, D)).reshape(n, H * D)
        out[route] = {"out": o.flatten().tolist(), "state": S[0].flatten().tolist()}
    ro, co = np.array(out["recurrent"]["out"]), np.array(out["chunked"]["out"])
    out["chunked_vs_recurrent_max_abs"] = float(np.max(np.abs(ro - co)))
    out["chunked_vs_recurrent_bytes_equal"] = bool(np.array_equal(ro.astype(np.float32),
                                                                  co.astype(np.float32)))
    return out


def made_with() -> dict:
    import transformers
    return {"script": "tools/refs/record_kimi_linear.py", "python": platform.python_version(),
            "torch": torch.__version__, "transformers": transformers.__version__,
            "numpy": np.__version__, "machine": platform.machine()}


def record_kda(out: Path) -> Path:
    rec = {"made_with": made_with(),
           "cases": {name: {"params": c, **kda_reference(c)} for name, c in kc.KDA_CASES.items()}}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "kda-case.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(path, {k: v["chunked_vs_recurrent_max_abs"] for k, v in rec["cases"].items()})
    return path


@torch.no_grad()
def router_margin(model, ids) -> float:
    """The smallest gap between the k-th and (k+1)-th selection score (sigmoid + bias, the
    groups not kept masked) over every MoE layer and position."""
    found, k = [], kc.CONFIG["num_experts_per_token"]

    def hook(mod, inp, _out):
        x = inp[0].reshape(-1, kc.CONFIG["hidden_size"]).float()
        s = torch.sigmoid(x @ mod.weight.float().T) + mod.e_score_correction_bias
        g = s.view(-1, mod.num_group, mod.num_experts // mod.num_group).topk(2, -1)[0].sum(-1)
        keep = torch.zeros_like(g).scatter_(1, g.topk(mod.topk_group, -1)[1], 1).bool()
        s = s.masked_fill(~keep.repeat_interleave(mod.num_experts // mod.num_group, 1), -1e9)
        t = torch.sort(s, -1, descending=True).values
        found.append(float((t[:, k - 1] - t[:, k]).min()))

    hs = [m.register_forward_hook(hook) for name, m in model.named_modules()
          if name.endswith("mlp.gate")]
    try:
        model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for h in hs:
            h.remove()
    return min(found)


LLAMA_CPP = Path("/work/peers-build/llama.cpp")


def llama_cpp_cases(gguf: Path, cases: list) -> dict:
    """llama-server on the GGUF: its greedy ids against transformers' (`same_ids_through`)."""
    rm = _by_path("record_moe")
    server = LLAMA_CPP / "build-cpu/bin/llama-server"
    got, cmd = rm.llama_server_cases(server, gguf, cases, gguf.with_suffix(".llama-server.log"))
    for g, c in zip(got, cases):
        a, b = g["greedy_ids"], c["greedy_ids"]
        g["same_ids_through"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
        g["within_rule"] = g["same_ids_through"] >= c["exact_prefix"]
    import subprocess
    v = subprocess.run([str(server), "--version"], text=True, capture_output=True,
                       stdin=subprocess.DEVNULL)
    return {"command": " ".join([server.name] + cmd[1:2] + ["GGUF"] + cmd[3:]),
            "llama_cpp": " ".join((v.stdout + v.stderr).split())[:160], "cases": got}


CONVERT_WRAPPER = r'''
import re
import sys
root = sys.argv.pop(1)
sys.path.insert(0, root)
sys.path.insert(1, root + "/gguf-py")
from conversion import kimi_linear as K
# the tiny tokenizer is plain byte-level BPE with GPT-2's regex, its hash unlisted
K.KimiLinearModel.set_vocab = lambda self: self._set_vocab_gpt2()
K.KimiLinearModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
# transformers 5.25 saves the dense MLP as block_sparse_moe.{gate,up,down}_proj (its rename of
# Moonshot's mlp.); the converter maps mlp.* only
_DENSE = re.compile(r"(model\.layers\.\d+)\.block_sparse_moe\.((gate|up|down)_proj\.weight)")
_orig = K.KimiLinearModel.modify_tensors
def _modify(self, data_torch, name, bid):
    m = _DENSE.fullmatch(name)
    if m:
        name = f"{m.group(1)}.mlp.{m.group(2)}"
    yield from _orig(self, data_torch, name, bid)
K.KimiLinearModel.modify_tensors = _modify
import convert_hf_to_gguf as c
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[1:]
c.main()
'''


def converter_check(hf: Path, ours: Path, work: Path) -> dict:
    """llama.cpp's converter (through CONVERT_WRAPPER) on a copy of the folder whose config
    also carries Moonshot's keys; its tensors and keys against our file's."""
    import shutil
    import subprocess
    import sys
    import gguf
    d = work / "hf-moonshot"
    shutil.copytree(hf, d)
    cfg = json.loads((d / "config.json").read_text())
    types = cfg["layer_types"]
    cfg["linear_attn_config"] = {
        "full_attn_layers": [i + 1 for i, t in enumerate(types) if t == "full_attention"],
        "kda_layers": [i + 1 for i, t in enumerate(types) if t == "linear_attention"],
        "head_dim": cfg["linear_head_dim"], "num_heads": cfg["linear_num_heads"],
        "short_conv_kernel_size": cfg["linear_conv_kernel_dim"]}
    cfg["first_k_dense_replace"] = cfg["mlp_layer_types"].count("dense")
    (d / "config.json").write_text(json.dumps(cfg, indent=2))
    wrap = work / "convert_wrapper.py"
    wrap.write_text(CONVERT_WRAPPER)
    out = work / "converter-F32.gguf"
    r = subprocess.run([sys.executable, str(wrap), str(LLAMA_CPP), str(d), "--outtype", "f32",
                        "--outfile", str(out)], text=True, capture_output=True)
    if r.returncode:
        return {"ran": False, "error": r.stderr[-2000:]}
    a, b = gguf.GGUFReader(str(out)), gguf.GGUFReader(str(ours))
    ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
    differ = {}
    for n in sorted(set(ta) & set(tb)):
        x, y = np.array(ta[n].data), np.array(tb[n].data)
        if x.shape != y.shape or x.dtype != y.dtype:
            differ[n] = "shape or type"
        elif x.tobytes() != y.tobytes():
            differ[n] = f"max {int(np.max(np.abs(x.view(np.int32).astype(np.int64) - y.view(np.int32))))} ulp"
    ka = {k: f.contents() for k, f in a.fields.items()}
    kb = {k: f.contents() for k, f in b.fields.items()}
    return {"ran": True, "wrapper": "CONVERT_WRAPPER in tools/refs/record_kimi_linear.py",
            "tensor_names_equal": set(ta) == set(tb), "tensors_differing": differ,
            "keys_only_theirs": sorted(set(ka) - set(kb)), "keys_only_ours": sorted(set(kb) - set(ka)),
            "values_differing": sorted(k for k in set(ka) & set(kb) if ka[k] != kb[k])}


def record_model(out: Path) -> Path:
    import tempfile
    with tempfile.TemporaryDirectory() as t:
        d = Path(t) / "hf"
        sha = kc.write(d)
        gguf = Path(t) / f"{kc.NAME}-F32.gguf"
        gguf_sha = kc.write_gguf(d, gguf)
        model, info = rq.load_hf(d)
        problems = {k: v for k, v in info.items() if v}
        cases, routes = [], []
        for p in rq.PROMPTS:
            greedy, top5 = rq.greedy_hf(model, p["prompt_ids"], rq.N_STEPS)
            margins = [s["logits"][0] - s["logits"][1] for s in top5]
            tie = next((i for i, m in enumerate(margins) if m < rq.NEAR_TIE), None)
            cases.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "greedy_ids": greedy,
                          "top5": top5, "near_tie_step": tie,
                          "exact_prefix": rq.N_STEPS if tie is None else tie + 1,
                          "min_top1_margin": float(min(margins)),
                          "router_margin": router_margin(model, p["prompt_ids"] + greedy[:-1])})
            with torch.no_grad():
                whole = model(input_ids=torch.tensor([p["prompt_ids"]]),
                              use_cache=True).logits[0, -1].numpy()
            step = rq.token_by_token(model, p["prompt_ids"])
            routes.append({"name": p["name"],
                           "max_abs_logit_diff": float(np.max(np.abs(whole - step))),
                           "bytes_equal": bool(np.array_equal(whole, step))})
        llama = llama_cpp_cases(gguf, cases)
        conv = converter_check(d, gguf, Path(t))
    rec = {
        "rule": rq.RULE,
        "made_with": made_with(),
        "checkpoint": {"name": kc.NAME, "config": kc.CONFIG,
                       "sha256": {f"hf/{k}": v for k, v in sha.items()}},
        "hf_check": {"class": type(model).__name__, "loading_problems": problems},
        "references": {"dtype": "float32", "attn_implementation": "eager",
                       "n_steps": rq.N_STEPS, "cases": cases},
        "routes": routes,
        "gguf": {"file": gguf.name, "sha256": gguf_sha, "written_by": "tools/refs/"
                 "kimi_checkpoint.py write_gguf (gguf package, llama.cpp's kimi-linear names)",
                 "llama_cpp": llama, "converter": conv},
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{kc.NAME}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(path, {c["name"]: (c["exact_prefix"], round(c["min_top1_margin"], 4),
                             round(c["router_margin"], 5)) for c in cases}, routes, problems,
          {g["name"]: g["same_ids_through"] for g in llama["cases"]})
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests/data/kimi_linear"))
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    record_kda(Path(a.out))
    record_model(Path(a.out))


if __name__ == "__main__":
    main()
