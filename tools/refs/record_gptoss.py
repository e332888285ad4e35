"""Record the references for the tiny gpt-oss checkpoint: tests/data/gptoss/gptoss-tiny.json.

    /work/refenv/bin/python tools/refs/record_gptoss.py --llama-cpp /work/peers-build/llama.cpp

Needs torch + transformers (the reference venv) and a CPU build of llama.cpp. Steps:
1. tools/refs/gptoss_checkpoint.py (the project's venv) writes hf/ (float32, fused experts);
2. llama.cpp's convert_hf_to_gguf.py writes gptoss-tiny-F32.gguf from it, and
   `llama-quantize ... MXFP4_MOE` gptoss-tiny-MXFP4.gguf from that (experts MXFP4, the other
   matrices Q8_0, norms / biases / sinks / router F32); their sha256 are recorded (the test
   regenerates hf/ and checks its sha256; the GGUFs it takes from its own run of the same
   commands when the tools are there, else it skips);
3. hf-MXFP4-dequant/: the MXFP4 file's every tensor dequantized (gguf-py) and written back
   under the HF names and fused layout (gate/up re-interleaved), the same config;
4. references: transformers float32 (eager attention, eager experts) on hf/ (for hf/ and the
   F32 GGUF) and on hf-MXFP4-dequant/ (for the MXFP4 GGUF): greedy N steps from the golden
   prompts, top-5 logits a step, the near-tie step and exact_prefix under the golden rule,
   the smallest router margin (k-th vs k+1-th logit) on the greedy path;
5. llama-server's greedy ids and top-5 logprobs on both GGUFs, and their agreement.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import torch

import record_moe as rm          # beside this file

ROOT = rm.ROOT
NAME = "gptoss-tiny"


@torch.no_grad()
def router_margin(model, ids: list[int]) -> float:
    found = []

    def hook(mod, inp, _out):
        x = inp[0].reshape(-1, mod.weight.shape[1]).float()
        s = torch.sort(x @ mod.weight.float().T + mod.bias.float(), -1, descending=True).values
        found.append(float((s[:, mod.top_k - 1] - s[:, mod.top_k]).min()))
    hs = [m.register_forward_hook(hook) for n, m in model.named_modules() if n.endswith("mlp.router")]
    try:
        model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for h in hs:
            h.remove()
    return min(found)


def reference_cases(model, tok, prompts):
    cases = []
    for p in prompts:
        g = rm.greedy_hf(model, p["prompt_ids"], rm.N_STEPS)
        margins = [t["logits"][0] - t["logits"][1] for t in g["top5"]]
        tie = next((i for i, m in enumerate(margins) if m < rm.NEAR_TIE), None)
        cases.append({
            "name": p["name"], "text": p["text"], "prompt_ids": p["prompt_ids"],
            "greedy_ids": g["greedy_ids"], "greedy_text": tok.decode(g["greedy_ids"]),
            "top5": g["top5"], "near_tie_step": tie,
            "exact_prefix": rm.N_STEPS if tie is None else tie + 1,
            "min_top1_margin": float(min(margins)),
            "router_margin": router_margin(model, p["prompt_ids"] + g["greedy_ids"][:-1]),
            "logsumexp": g["logsumexp"]})
    return cases


def dequant_hf(gguf_path: Path, hf_src: Path, out: Path) -> None:
    """The GGUF's tensors dequantized, under the HF names and layout, beside hf_src's other files."""
    sys.path.insert(0, str(Path(rm.__file__).resolve().parents[0]))
    import gguf
    from gguf.quants import dequantize
    from safetensors.numpy import save_file
    r = gguf.GGUFReader(str(gguf_path))
    g = {t.name: np.asarray(dequantize(t.data, t.tensor_type), np.float32).reshape(
        [int(n) for n in reversed(t.shape.tolist())]) for t in r.tensors}
    top = {"token_embd.weight": "model.embed_tokens.weight", "output.weight": "lm_head.weight",
           "output_norm.weight": "model.norm.weight"}
    lay = {"attn_norm.weight": "input_layernorm.weight",
           "post_attention_norm.weight": "post_attention_layernorm.weight",
           "attn_sinks.weight": "self_attn.sinks", "ffn_gate_inp.weight": "mlp.router.weight",
           "ffn_gate_inp.bias": "mlp.router.bias"}
    for a, b in (("q", "q"), ("k", "k"), ("v", "v"), ("output", "o")):
        for kind in ("weight", "bias"):
            lay[f"attn_{a}.{kind}"] = f"self_attn.{b}_proj.{kind}"
    w = {}
    n_layer = 1 + max(int(n.split(".")[1]) for n in g if n.startswith("blk."))
    for n, hf in top.items():
        w[hf] = g[n]
    for i in range(n_layer):
        b, p = f"blk.{i}.", f"model.layers.{i}."
        for n, hf in lay.items():
            w[p + hf] = g[b + n]
        gate, up = g[b + "ffn_gate_exps.weight"], g[b + "ffn_up_exps.weight"]     # [E, ff, d]
        E, ff, d = gate.shape
        gu = np.empty((E, d, 2 * ff), np.float32)
        gu[:, :, 0::2], gu[:, :, 1::2] = gate.transpose(0, 2, 1), up.transpose(0, 2, 1)
        gub = np.empty((E, 2 * ff), np.float32)
        gub[:, 0::2], gub[:, 1::2] = g[b + "ffn_gate_exps.bias"], g[b + "ffn_up_exps.bias"]
        w[p + "mlp.experts.gate_up_proj"], w[p + "mlp.experts.gate_up_proj_bias"] = gu, gub
        w[p + "mlp.experts.down_proj"] = np.ascontiguousarray(g[b + "ffn_down_exps.weight"].transpose(0, 2, 1))
        w[p + "mlp.experts.down_proj_bias"] = g[b + "ffn_down_exps.bias"]
    out.mkdir(parents=True, exist_ok=True)
    for f in hf_src.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, out / f.name)
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(w.items())}, str(out / "model.safetensors"),
              metadata={"format": "pt"})


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--work", default="/tmp/gptoss-refs-work")
    ap.add_argument("--out", default=str(ROOT / "tests/data/gptoss"))
    ap.add_argument("--writer-python", default="/work/main/.venv/bin/python")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    lc = Path(a.llama_cpp)
    prompts = rm.golden_prompts()
    shutil.rmtree(a.work, ignore_errors=True)
    work = Path(a.work)
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = rm.sh([a.writer_python, "-m", "tools.refs.gptoss_checkpoint", a.work], cwd=ROOT, env=env)
    sha = {}
    for line in r.stdout.splitlines():
        h, path = line.split("  ", 1)
        sha[str(Path(path).relative_to(NAME))] = h
    root = work / NAME
    f32, mx = root / f"{NAME}-F32.gguf", root / f"{NAME}-MXFP4.gguf"
    conv = [sys.executable, str(lc / "convert_hf_to_gguf.py"), str(root / "hf"), "--outtype", "f32",
            "--outfile", str(f32)]
    rm.sh(conv)
    quant = [str(lc / "build-cpu/bin/llama-quantize"), str(f32), str(mx), "MXFP4_MOE"]
    rm.sh(quant)
    for p in (f32, mx):
        sha[p.name] = rm.sha256_file(p) if hasattr(rm, "sha256_file") else __import__(
            "hashlib").sha256(p.read_bytes()).hexdigest()
    dig = rm.sh([a.writer_python, "-c", "import sys; from tools.refs.gptoss_checkpoint import "
                 "tensor_digest as d; print(d(sys.argv[1])); print(d(sys.argv[2]))", str(f32), str(mx)],
                cwd=ROOT, env=env).stdout.split()
    digests = {f32.name: dig[0], mx.name: dig[1]}
    dequant_hf(mx, root / "hf", root / "hf-MXFP4-dequant")
    vers = rm.versions(lc, lc / "build-cpu/bin/llama-server")
    rec = {"model": NAME, "rule": rm.RULE, "n_steps": rm.N_STEPS,
           "checkpoint": {"writer": "tools/refs/gptoss_checkpoint.py",
                          "commands": ["PYTHONPATH=. python -m tools.refs.gptoss_checkpoint OUT",
                                       "convert_hf_to_gguf.py OUT/gptoss-tiny/hf --outtype f32",
                                       "llama-quantize gptoss-tiny-F32.gguf gptoss-tiny-MXFP4.gguf MXFP4_MOE"],
                          "sha256": sha,
                          # gptoss_checkpoint.write_gguf's files hold these same tensor bytes
                          "tensor_digest": digests}}
    rec["hf_check"] = rm.hf_check(root / "hf")
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(root / "hf"))
    refs, lcpp = {}, {}
    for qt, hf_dir, gg in (("F32", root / "hf", f32), ("MXFP4", root / "hf-MXFP4-dequant", mx)):
        print(f"transformers {qt}", flush=True)
        model, _ = rm.load_hf(hf_dir)
        refs[qt] = {"reference": f"transformers {vers['transformers']} float32 CPU (eager) on "
                                 + ("hf/" if qt == "F32" else "the MXFP4 GGUF's weights dequantized"),
                    "cases": reference_cases(model, tok, prompts)}
        del model
        print(f"llama-server {qt}", flush=True)
        cases, cmd = rm.llama_server_cases(lc / "build-cpu/bin/llama-server", gg, prompts,
                                           work / f"{qt}-server.log")
        by = {c["name"]: c for c in refs[qt]["cases"]}
        for c in cases:
            c["agreement"] = rm.agreement(by[c["name"]], c)
        lcpp[qt] = {"file": gg.name, "compared_with": f"references.{qt}", "cases": cases}
    rec["references"], rec["llama_cpp"], rec["tools"] = refs, lcpp, vers
    rec["record_command"] = "/work/refenv/bin/python tools/refs/record_gptoss.py --llama-cpp /work/peers-build/llama.cpp"
    Path(a.out).mkdir(parents=True, exist_ok=True)
    p = Path(a.out) / f"{NAME}.json"
    p.write_text(rm.dumps(rec), encoding="utf-8")
    print(f"wrote {p}")
    for qt, block in lcpp.items():
        for c in block["cases"]:
            ag = c["agreement"]
            print(f"  {qt:5s} {c['name']:11s} same through {ag['same_ids_through']:2d}/{rm.N_STEPS} "
                  f"tie {ag['near_tie_step']} within_rule {ag['within_rule']} "
                  f"max|dlogprob| {ag['max_abs_logprob_diff']}")


if __name__ == "__main__":
    main()
