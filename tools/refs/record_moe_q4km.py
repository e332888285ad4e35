"""Add the Q4_K_M file's reference to a tiny MoE record (tests/data/moe/<family>.json):

    /work/venv-ref/bin/python tools/refs/record_moe_q4km.py --llama-cpp /work/peers-build/llama.cpp \
        [--family glm4moe-tiny] [--work /tmp/moe-q4km-work]

At the tiny widths (rows of 32-128) llama-quantize's Q4_K_M is Q5_0 where it would be Q4_K and
Q8_0 where it would be Q6_K (its fallback for rows not a multiple of 256): what a GLM-4.5-Air
Q4_K_M file holds for its FF-1408 / 10,944 rows. The writer (tools/refs/moe_checkpoint.py
--qtype Q4_K_M, gguf-py's quantizers) makes that file for CI; here:
- `q4_k_m.llama_quantize`: llama-quantize's Q4_K_M of the writer's F32 file compared with the
  writer's Q4_K_M file tensor by tensor (type and bytes);
- `references.Q4_K_M`: transformers float32 on that file's weights dequantized
  (hf-Q4_K_M-dequant/), greedy under the golden rule, as record_moe.py records Q8_0;
- `llama_cpp.Q4_K_M`: llama-server's greedy ids and top-5 on the file, and their agreement.
The F32 / Q8_0 parts of the record are left as they are (their files' sha256 checked equal).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

import torch

import record_moe as rm     # beside this file


def compare_quantized(mine: Path, theirs: Path) -> dict:
    import gguf
    a = {t.name: t for t in gguf.GGUFReader(str(mine)).tensors}
    b = {t.name: t for t in gguf.GGUFReader(str(theirs)).tensors}
    types: dict = {}
    for t in a.values():
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    diff_type = sorted(n for n in a if n in b and a[n].tensor_type != b[n].tensor_type)
    diff_bytes = sorted(n for n in a if n in b and a[n].data.tobytes() != b[n].data.tobytes())
    return {"tensors": len(a), "same_names": sorted(a) == sorted(b), "types": types,
            "type_differs": diff_type, "bytes_differ": diff_bytes}


def main(argv=None) -> None:
    import moe_checkpoint as mc
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", nargs="+", default=["glm4moe-tiny"])
    ap.add_argument("--llama-cpp", required=True)
    ap.add_argument("--work", default="/tmp/moe-q4km-work")
    ap.add_argument("--out", default=str(rm.ROOT / "tests/data/moe"))
    ap.add_argument("--writer-python", default="/work/main/.venv/bin/python")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    prompts = rm.golden_prompts()
    shutil.rmtree(a.work, ignore_errors=True)
    Path(a.work).mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(rm.ROOT)}
    r = rm.sh([a.writer_python, "-m", "tools.refs.moe_checkpoint", a.work, "--family", *a.family,
               "--qtype", "F32", "Q8_0", "Q4_K_M", "--dequant-hf", "Q8_0", "Q4_K_M"], cwd=rm.ROOT, env=env)
    sha: dict[str, dict] = {n: {} for n in a.family}
    for line in r.stdout.splitlines():
        h, path = line.split("  ", 1)
        rel = Path(path).relative_to(a.work)
        sha[rel.parts[0]][str(Path(*rel.parts[1:]))] = h
    vers = rm.versions(Path(a.llama_cpp), Path(a.llama_cpp) / "build-cpu/bin/llama-server")
    quantize = Path(a.llama_cpp) / "build-cpu/bin/llama-quantize"
    for name in a.family:
        p = Path(a.out) / f"{name}.json"
        rec = json.loads(p.read_text())
        for rel, h in rec["checkpoint"]["sha256"].items():
            assert sha[name].get(rel) == h, f"{name}: {rel} differs from the record: regenerate it first"
        root = Path(a.work) / name
        spec = rec["checkpoint"]["spec"]
        theirs = Path(a.work) / f"{name}-llama-quantize-Q4_K_M.gguf"
        rm.sh([str(quantize), str(root / f"{name}-F32.gguf"), str(theirs), "Q4_K_M", "1"])
        comp = compare_quantized(root / f"{name}-Q4_K_M.gguf", theirs)
        print(f"[{name}] llama-quantize vs writer: {comp}", flush=True)
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(str(root / "hf"))
        model, _ = rm.load_hf(root / "hf-Q4_K_M-dequant")
        print(f"[{name}] transformers greedy Q4_K_M", flush=True)
        ref = {"file": f"{name}-Q4_K_M.gguf",
               "reference": f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) "
                            "on the Q4_K_M GGUF weights dequantized (hf-Q4_K_M-dequant/)",
               "cases": rm.reference_cases(model, tok, spec, prompts)}
        del model
        print(f"[{name}] llama-server Q4_K_M", flush=True)
        cases, cmd = rm.llama_server_cases(Path(a.llama_cpp) / "build-cpu/bin/llama-server",
                                           root / f"{name}-Q4_K_M.gguf", prompts,
                                           Path(a.work) / f"{name}-Q4_K_M-server.log")
        by = {c["name"]: c for c in ref["cases"]}
        for c in cases:
            c["agreement"] = rm.agreement(by[c["name"]], c)
        for rel, h in sha[name].items():
            if "Q4_K_M" in rel:
                rec["checkpoint"]["sha256"][rel] = h
        rec["checkpoint"]["files"]["Q4_K_M"] = f"{name}-Q4_K_M.gguf"
        rec["checkpoint"]["files"]["Q4_K_M weights as HF"] = "hf-Q4_K_M-dequant/"
        rec["references"]["Q4_K_M"] = ref
        rec["llama_cpp"]["Q4_K_M"] = {
            "file": f"{name}-Q4_K_M.gguf", "compared_with": "references.Q4_K_M",
            "command": " ".join([Path(cmd[0]).name] + cmd[1:]).replace(str(root) + "/", ""),
            "cases": cases}
        rec["q4_k_m"] = {
            "writer_command": f"PYTHONPATH=. python -m tools.refs.moe_checkpoint OUT --family {name} "
                              "--qtype F32 Q8_0 Q4_K_M --dequant-hf Q8_0 Q4_K_M",
            "llama_quantize_command": f"llama-quantize {name}-F32.gguf OUT.gguf Q4_K_M 1",
            "llama_quantize": comp,
            "record_command": f"{sys.executable} tools/refs/record_moe_q4km.py --llama-cpp {a.llama_cpp} --family {name}",
            "tools": vers}
        p.write_text(rm.dumps(rec), encoding="utf-8")
        print(f"wrote {p}", flush=True)
        for c in cases:
            ag = c["agreement"]
            print(f"  Q4_K_M {c['name']:11s} same through {ag['same_ids_through']:2d}/{rm.N_STEPS} "
                  f"tie {ag['near_tie_step']} within_rule {ag['within_rule']}", flush=True)


if __name__ == "__main__":
    main()
