"""Record llama.cpp's references for the tiny Qwen3-Next checkpoint as GGUF `qwen3next`
(tests/data/qwen3next/qwen3next-tiny-gguf.json), and with --arch qwen35moe for the same weights
as the tiny Qwen3.5-MoE checkpoint (tools/refs/next35_checkpoint.py, HF Qwen3_5MoeForCausalLM)
and its GGUF `qwen35moe` (tests/data/qwen3next/qwen35moe-tiny-gguf.json).

    /work/venv-ref/bin/python tools/refs/record_qwen3next_gguf.py --llama-cpp /work/peers-build/llama.cpp [--arch qwen35moe]

Needs torch + transformers (a reference venv) and a CPU build of llama.cpp (llama-server).
The GGUFs are written by tools/refs/next_gguf.py (numpy + gguf, under llama.cpp's names: the
tests regenerate them and compare the sha256 recorded here). It records:

- `files`: the sha256 of the HF folder's files and of the F32 and Q8_0 GGUFs.
- `converter`: llama.cpp's convert_hf_to_gguf.py on the same HF folder, through a thin
  wrapper (the tiny tokenizer's pre-tokenizer, GPT-2's byte-level split, is not one the
  converter knows by hash: the wrapper names it "gpt-2") and with the converter's own
  `--no-mtp` (without it the converter stops on `assert self.opt_num_mtp_layers != 0`: a
  Qwen3-Next folder without MTP tensors); how its files compare with next_gguf's, key by
  key and tensor by tensor (bytes).
- `llama_cpp`: per GGUF, llama-server's greedy ids and top-5 logprobs from the same token-id
  prompts as tools/refs/record_qwen3next.py (F32 KV cache, flash attention off), each case's
  near tie and exact prefix from its own margins, and its agreement with transformers float32
  (tests/data/qwen3next/qwen3next-tiny.json's greedy path, teacher-forced here for the
  log-softmax).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]


def _by_path(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"tools/refs/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


rq = _by_path("record_qwen3next")      # the prompts, the transformers model
rm = _by_path("record_moe")            # llama-server's cases, compare_gguf, agreement
ng = _by_path("next_gguf")
n35 = _by_path("next35_checkpoint")
nc = rq.nc

WRAPPER = r'''
import sys
root = sys.argv.pop(1)
sys.path.insert(0, root)
sys.path.insert(1, root + "/gguf-py")
from conversion import base
# the tiny checkpoint's tokenizer (byte-level BPE, GPT-2's split) is not one the converter
# knows by its hash: name its pre-tokenizer
base.TextModel.get_vocab_base_pre = lambda self, tokenizer: "gpt-2"
# transformers maps model_type qwen3_5_moe_text to Qwen3_5Tokenizer, which adds a token past
# the checkpoint's 512 (the converter then stops on its vocab assertion): read the folder's
# tokenizer.json as it is
import transformers
from transformers import PreTrainedTokenizerFast
transformers.AutoTokenizer.from_pretrained = lambda d, **kw: PreTrainedTokenizerFast.from_pretrained(d, **kw)
import convert_hf_to_gguf as c
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[1:]
c.main()
'''


REQUEST = ("POST /completion {prompt: ids, n_predict: 24, temperature: 0, n_probs: 5, "
           "ignore_eos: true, cache_prompt: false, samplers: [temperature]}")


def near_tie(top5) -> int | None:
    m = [t["logprobs"][0] - t["logprobs"][1] if t else None for t in top5]
    return next((i for i, x in enumerate(m) if x is not None and x < rq.NEAR_TIE), None)


@torch.no_grad()
def with_logsumexp(model, case: dict) -> dict:
    """The transformers case with each greedy step's log-sum-exp (teacher-forced, the prompt
    and greedy ids in one pass), for record_moe.agreement."""
    ids = case["prompt_ids"] + case["greedy_ids"][:-1]
    logits = model(input_ids=torch.tensor([ids]), use_cache=False).logits[0].float()
    n0 = len(case["prompt_ids"])
    lse = torch.logsumexp(logits[n0 - 1:], -1).tolist()
    return {**case, "logsumexp": lse}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--out", default=str(ROOT / "tests/data/qwen3next"))
    ap.add_argument("--arch", default="qwen3next", choices=["qwen3next", "qwen35moe"])
    a = ap.parse_args(argv)
    arch = a.arch
    name = nc.NAME if arch == "qwen3next" else n35.NAME
    torch.set_num_threads(1)
    lcpp = Path(a.llama_cpp)
    server = lcpp / "build-cpu/bin/llama-server"
    ref = json.loads((ROOT / "tests/data/qwen3next/qwen3next-tiny.json").read_text())
    rec = {"rule": rq.RULE,
           "made_with": {"script": "tools/refs/record_qwen3next_gguf.py",
                         "python": platform.python_version(), "torch": torch.__version__,
                         "numpy": np.__version__, "machine": platform.machine(),
                         "llama.cpp": str(lcpp), "llama-server": str(server)},
           "arch": arch, "files": {}, "converter": {}, "llama_cpp": {}}
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        hf = t / "hf"
        if arch == "qwen3next":
            for f, h in nc.write(hf).items():
                rec["files"][f"hf/{f}"] = h
            assert rec["files"] == ref["checkpoint"]["sha256"], "not the recorded checkpoint"
        else:
            for f, h in n35.write(hf).items():
                rec["files"][f"hf/{f}"] = h
        model, info = rq.load_hf(hf)
        refs = {c["name"]: with_logsumexp(model, c) for c in ref["references"]["cases"]}
        if arch == "qwen35moe":
            # Qwen3_5MoeForCausalLM on the same weights regrouped: transformers' own greedy
            # path (its cache: chunked prompt, recurrent steps) against the Qwen3-Next record
            rec["transformers"] = {"class": type(model).__name__,
                                   "loading_problems": {k: v for k, v in info.items() if v},
                                   "cases": []}
            for c in ref["references"]["cases"]:
                greedy, top5 = rq.greedy_hf(model, c["prompt_ids"], rq.N_STEPS)
                worst = max(abs(x - y) for s1, s2 in zip(top5, c["top5"])
                            for x, y in zip(s1["logits"], s2["logits"]))
                rec["transformers"]["cases"].append(
                    {"name": c["name"], "greedy_equal_to_qwen3next_record": greedy == c["greedy_ids"],
                     "max_abs_top5_logit_diff": worst})
        wrapper = t / "convert_wrapper.py"
        wrapper.write_text(WRAPPER)
        for qt in ("F32", "Q8_0"):
            mine = t / f"{name}-{qt}.gguf"
            rec["files"][mine.name] = ng.write_gguf(mine, qt, hf, arch=arch)
            theirs = t / f"converted-{qt}.gguf"
            cmd = [sys.executable, str(wrapper), str(lcpp), str(hf), "--outtype", qt.lower(),
                   "--no-mtp", "--outfile", str(theirs)]
            subprocess.run(cmd, check=True, capture_output=True, text=True)
            rec["converter"][qt] = {
                "command": "python convert_wrapper.py LLAMA_CPP HF --outtype " + qt.lower()
                           + " --no-mtp --outfile OUT (the wrapper: this script's WRAPPER)",
                "compare_with_next_gguf": rm.compare_gguf(mine, theirs)}
            cases, cmd = rm.llama_server_cases(server, mine, rq.PROMPTS, t / f"server-{qt}.log")
            for c in cases:
                p = next(x for x in rq.PROMPTS if x["name"] == c["name"])
                tie = near_tie(c["top5"])
                c.update(prompt_ids=p["prompt_ids"], near_tie_step=tie,
                         exact_prefix=rq.N_STEPS if tie is None else tie + 1,
                         agreement_with_transformers=rm.agreement(refs[c["name"]], c))
            rec["llama_cpp"][qt] = {"command": " ".join(str(x) for x in cmd).replace(str(t), "TMP"),
                                    "request": REQUEST, "cases": cases}
        # llama.cpp's Q8_0 dot products quantize the activations to Q8_0 too (a ~0.2 logprob
        # difference on these tiny widths); the Q8_0 file's weights dequantized into an F32
        # file are the reference foldserve's Q8_0 path (float rows x stored blocks) is held to
        deq = t / f"{name}-Q8_0-weights-F32.gguf"
        rec["files"][deq.name] = ng.write_gguf(deq, "F32", hf, weights_of="Q8_0", arch=arch)
        cases, cmd = rm.llama_server_cases(server, deq, rq.PROMPTS, t / "server-deq.log")
        for c in cases:
            p = next(x for x in rq.PROMPTS if x["name"] == c["name"])
            tie = near_tie(c["top5"])
            c.update(prompt_ids=p["prompt_ids"], near_tie_step=tie,
                     exact_prefix=rq.N_STEPS if tie is None else tie + 1)
        rec["llama_cpp"]["Q8_0 weights as F32"] = {
            "command": " ".join(str(x) for x in cmd).replace(str(t), "TMP"), "request": REQUEST,
            "file": f"next_gguf.write_gguf(F32, weights_of=Q8_0, arch={arch})", "cases": cases}
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}-gguf.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    for qt, blk in rec["llama_cpp"].items():
        print(qt, [(c["name"], c["exact_prefix"], c.get("agreement_with_transformers", {}).get("same_ids_through"),
                    c.get("agreement_with_transformers", {}).get("max_abs_logprob_diff")) for c in blk["cases"]])
    for qt, blk in rec["converter"].items():
        print(qt, blk["compare_with_next_gguf"]["tensors_differing"],
              blk["compare_with_next_gguf"]["keys_differing"])


if __name__ == "__main__":
    main()
