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
- `references["Q4_K_M q8_K"]`: the same with every K-quant product's input rounded through
  ggml's q8_K first (q8_k_activations): the arithmetic llama.cpp's CPU backend and foldserve's
  cpu ops backend define for Q4_K / Q6_K. At these widths the plain float32 reference and
  that arithmetic part within a few steps (llama.cpp and foldserve alike): the record keeps both;
- `llama_cpp.Q4_K_M`: llama-server's greedy ids and top-5 on the Q4_K_M file (its K-quant dot
  products quantize the activations to q8_K) and their agreement with both references.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
from pathlib import Path

import torch

import record_moe as rm            # beside this file
from record_moe_q4km import compare_quantized


def q8_k(x: torch.Tensor) -> torch.Tensor:
    """x (float32, last axis a multiple of 256) as ggml's quantize_row_q8_K_ref leaves it:
    per 256 values, iscale = -127 / (the first value of the largest |x|), q = min(127,
    nearest_int(iscale * x)), d = 1 / iscale; returns q * d in float32 (0 for an all-zero block)."""
    import numpy as np
    a = x.detach().to(torch.float32).numpy()
    shape = a.shape
    b = a.reshape(-1, 256)
    idx = np.abs(b).argmax(axis=1)                      # the first of the largest |x|
    mx = b[np.arange(b.shape[0]), idx]
    zero = mx == 0
    iscale = np.float32(-127.0) / np.where(zero, np.float32(1), mx)
    q = np.minimum(np.float32(127), np.rint((iscale[:, None] * b).astype(np.float32)))
    d = (np.float32(1.0) / iscale).astype(np.float32)
    out = np.where(zero[:, None], np.float32(0), q * d[:, None]).astype(np.float32)
    return torch.from_numpy(out.reshape(shape))


@contextlib.contextmanager
def q8_k_activations(model):
    """Within: every product against a K-quant matrix (every nn.Linear and the experts' 3-D
    weights: all the 2-D weights of these Q4_K_M files are Q4_K or Q6_K) takes its input rounded
    through q8_K first, as llama.cpp's CPU backend and foldserve's "cpu" ops backend multiply
    Q4_K / Q6_K blocks; the router (ffn_gate_inp, F32 in the file) keeps float32 input."""
    import torch.nn.functional as Fn
    router = {m.weight.data_ptr() for n, m in model.named_modules() if n.endswith("mlp.gate")}
    orig = Fn.linear
    counts = {"quantized": 0, "router": 0}

    def linear(x, w, b=None):
        if w.data_ptr() in router:
            counts["router"] += 1
            return orig(x, w, b)
        assert x.shape[-1] % 256 == 0, f"q8_k_activations: an input of width {x.shape[-1]}"
        counts["quantized"] += 1
        return orig(q8_k(x), w, b)

    Fn.linear = linear
    try:
        yield counts
    finally:
        Fn.linear = orig


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
    prompts = rm.golden_prompts()
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
        print(f"[{name}] transformers greedy Q4_K_M, activations through q8_K", flush=True)
        with q8_k_activations(model) as counts:
            q8_cases = rm.reference_cases(model, tok, spec, prompts)
        assert counts["quantized"] > 0 and counts["router"] > 0, counts
        ref_q8 = {"file": f"{name}-Q4_K_M.gguf",
                  "reference": f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) "
                               "on hf-Q4_K_M-dequant/, every K-quant product's input rounded through ggml's "
                               "q8_K first (record_moe_kquant.q8_k_activations; the router's stays float32): "
                               "the arithmetic llama.cpp's CPU backend and foldserve's cpu ops backend define "
                               "for Q4_K / Q6_K",
                  "cases": q8_cases}
        del model
        print(f"[{name}] llama-server Q4_K_M", flush=True)
        cases, cmd = rm.llama_server_cases(llama / "build-cpu/bin/llama-server", root / f"{name}-Q4_K_M.gguf",
                                           prompts, Path(a.work) / f"{name}-Q4_K_M-server.log")
        by = {c["name"]: c for c in ref["cases"]}
        by_q8 = {c["name"]: c for c in ref_q8["cases"]}
        for c in cases:
            c["agreement"] = rm.agreement(by[c["name"]], c)
            c["agreement_q8_K"] = rm.agreement(by_q8[c["name"]], c)
        rec["references"] = {"Q4_K_M": ref, "Q4_K_M q8_K": ref_q8}
        rec["llama_cpp"] = {"Q4_K_M": {
            "file": f"{name}-Q4_K_M.gguf",
            "compared_with": "references.Q4_K_M (agreement) and references['Q4_K_M q8_K'] (agreement_q8_K)",
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
        for key in ("agreement", "agreement_q8_K"):
            for c in cases:
                ag = c[key]
                print(f"  {key:14s} {c['name']:11s} same through {ag['same_ids_through']:2d}/{rm.N_STEPS} "
                      f"tie {ag['near_tie_step']} within_rule {ag['within_rule']} "
                      f"max|dlogprob| {ag['max_abs_logprob_diff']}", flush=True)


if __name__ == "__main__":
    main()
