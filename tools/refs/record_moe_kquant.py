"""Record the reference of a tiny MoE whose Q4_K_M file holds real Q4_K and Q6_K blocks
(every weight row a multiple of 256): tests/data/moe/<family>.json.

    /work/venv-ref/bin/python tools/refs/record_moe_kquant.py --llama-cpp /work/peers-build/llama.cpp \
        [--family glm4moe-k256] [--work /tmp/moe-kquant-work]

The writer (tools/refs/moe_checkpoint.py, run in the project's venv) makes the HF folder, the F32
GGUF, the Q4_K_M GGUF (Q4_K / Q6_K quantized by tools/refs/kquants_numpy.py, the port of ggml's
reference quantizers) and hf-Q4_K_M-dequant/ (the Q4_K_M file's weights as float32). Recorded:
- `checkpoint`: the spec and every file's sha256 (tests regenerate only the Q4_K_M GGUF);
- `hf_check`: transformers loads hf/ with no missing / unexpected keys and saves the same;
- `q4_k_m.llama_quantize`: llama-quantize's Q4_K_M of the writer's F32 file against the
  writer's Q4_K_M file, tensor by tensor (types, bytes), and the type counts;
- `references.Q4_K_M`: transformers float32 on hf-Q4_K_M-dequant/, greedy under the golden rule
  (record_moe.py's reference_cases);
- `llama_cpp.Q4_K_M`: llama-server's greedy ids and top-5 on the Q4_K_M file (its K-quant dot
  products quantize the activations to q8_K, as foldserve's cpu backend does) and their
  agreement with the reference.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import torch

import record_moe as rm            # beside this file
from record_moe_q4km import compare_quantized


def main(argv=None) -> None:
    import moe_checkpoint as mc
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", nargs="+", default=["glm4moe-k256"])
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--work", default="/tmp/moe-kquant-work")
    ap.add_argument("--out", default=str(rm.ROOT / "tests/data/moe"))
    ap.add_argument("--writer-python", default="/work/main/.venv/bin/python")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    golden = json.loads(rm.GOLDEN.read_text())
    prompts = [{"name": c["name"], "text": c["text"], "prompt_ids": c["prompt_ids"]} for c in golden["cases"]]
    shutil.rmtree(a.work, ignore_errors=True)
    Path(a.work).mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(rm.ROOT)}
    r = rm.sh([a.writer_python, "-m", "tools.refs.moe_checkpoint", a.work, "--family", *a.family,
               "--qtype", "F32", "Q4_K_M", "--dequant-hf", "Q4_K_M"], cwd=rm.ROOT, env=env)
    sha: dict[str, dict] = {n: {} for n in a.family}
    for line in r.stdout.splitlines():
        h, path = line.split("  ", 1)
        rel = Path(path).relative_to(a.work)
        sha[rel.parts[0]][str(Path(*rel.parts[1:]))] = h
    llama = Path(a.llama_cpp)
    vers = rm.versions(llama, llama / "build-cpu/bin/llama-server")
    for name in a.family:
        root = Path(a.work) / name
        spec = mc.spec_dict(mc.FAMILIES[name])
        rec: dict = {"model": name, "rule": rm.RULE, "n_steps": rm.N_STEPS}
        rec["checkpoint"] = {
            "writer": "tools/refs/moe_checkpoint.py (Q4_K / Q6_K: tools/refs/kquants_numpy.py)",
            "command": f"PYTHONPATH=. python -m tools.refs.moe_checkpoint OUT --family {name} "
                       "--qtype F32 Q4_K_M --dequant-hf Q4_K_M",
            "spec": spec, "sha256": sha[name],
            "files": {"hf": "hf/", "F32": f"{name}-F32.gguf", "Q4_K_M": f"{name}-Q4_K_M.gguf",
                      "Q4_K_M weights as HF": "hf-Q4_K_M-dequant/"}}
        print(f"[{name}] transformers check", flush=True)
        rec["hf_check"] = rm.hf_check(root / "hf")
        theirs = Path(a.work) / f"{name}-llama-quantize-Q4_K_M.gguf"
        rm.sh([str(llama / "build-cpu/bin/llama-quantize"), str(root / f"{name}-F32.gguf"), str(theirs), "Q4_K_M", "1"])
        comp = compare_quantized(root / f"{name}-Q4_K_M.gguf", theirs)
        print(f"[{name}] llama-quantize vs writer: {comp}", flush=True)
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(str(root / "hf"))
        print(f"[{name}] transformers greedy Q4_K_M", flush=True)
        model, _ = rm.load_hf(root / "hf-Q4_K_M-dequant")
        ref = {"file": f"{name}-Q4_K_M.gguf",
               "reference": f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) "
                            "on the Q4_K_M GGUF weights dequantized (hf-Q4_K_M-dequant/)",
               "cases": rm.reference_cases(model, tok, spec, prompts)}
        del model
        print(f"[{name}] llama-server Q4_K_M", flush=True)
        cases, cmd = rm.llama_server_cases(llama / "build-cpu/bin/llama-server", root / f"{name}-Q4_K_M.gguf",
                                           prompts, Path(a.work) / f"{name}-Q4_K_M-server.log")
        by = {c["name"]: c for c in ref["cases"]}
        for c in cases:
            c["agreement"] = rm.agreement(by[c["name"]], c)
        rec["references"] = {"Q4_K_M": ref}
        rec["llama_cpp"] = {"Q4_K_M": {
            "file": f"{name}-Q4_K_M.gguf", "compared_with": "references.Q4_K_M",
            "command": " ".join([Path(cmd[0]).name] + cmd[1:]).replace(str(root) + "/", "")
                       + f"; POST /completion {{prompt: ids, n_predict: {rm.N_STEPS}, temperature: 0, "
                         f"n_probs: {rm.TOP}, ignore_eos: true, samplers: [temperature]}}",
            "cases": cases}}
        rec["q4_k_m"] = {
            "llama_quantize_command": f"llama-quantize {name}-F32.gguf OUT.gguf Q4_K_M 1",
            "llama_quantize": comp}
        rec["tools"] = vers
        rec["record_command"] = (f"{sys.executable} tools/refs/record_moe_kquant.py "
                                 f"--llama-cpp {a.llama_cpp} --family {name}")
        p = Path(a.out) / f"{name}.json"
        p.write_text(rm.dumps(rec), encoding="utf-8")
        print(f"wrote {p}", flush=True)
        for c in cases:
            ag = c["agreement"]
            print(f"  Q4_K_M {c['name']:11s} same through {ag['same_ids_through']:2d}/{rm.N_STEPS} "
                  f"tie {ag['near_tie_step']} within_rule {ag['within_rule']} "
                  f"max|dlogprob| {ag['max_abs_logprob_diff']}", flush=True)


if __name__ == "__main__":
    main()
