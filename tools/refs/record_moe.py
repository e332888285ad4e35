"""Record the references for the tiny MoE checkpoints: tests/data/moe/<family>.json.

    /work/venv-ref/bin/python tools/refs/record_moe.py --llama-cpp /work/peers-build/llama.cpp \
        [--family qwen3moe-tiny glm4moe-tiny] [--work /tmp/moe-refs-work] [--out tests/data/moe]

Needs torch + transformers (a reference venv, not the project's) and a CPU build of llama.cpp
(llama-server); the checkpoints themselves are written by tools/refs/moe_checkpoint.py in
the project's venv (`--writer-python`), so the files recorded are the files CI regenerates.

For each family it records:
- `checkpoint`: the spec and the sha256 of every file the writer makes.
- `hf_check`: transformers loads the HF folder with no missing / unexpected / mismatched
  keys, and its save_pretrained gives the same config.json text and the same tensors.
- `converter`: llama.cpp's convert_hf_to_gguf.py on the HF folder (GLM through a thin
  wrapper, and GLM-4.7-Flash's Glm4MoeLiteForCausalLM too: their set_vocab wants GLM's own special tokens, so the wrapper takes the plain
  byte-level BPE vocabulary path), compared key by key and tensor by tensor with the writer's GGUF.
- `references`: per GGUF type, transformers float32 on exactly that file's weights (F32: the HF
  folder; Q8_0: the HF folder of the Q8_0 file's weights dequantized), greedy for N steps from
  each prompt, in the golden file's format and under its `rule` (prompt_ids, greedy_ids, top5
  ids and logits per step, near_tie_step, exact_prefix), plus the smallest router margin met on
  the greedy path (`router_margin`, see _router_margins).
- `llama_cpp`: per GGUF type, llama-server's greedy ids and top-5 logprobs on the same
  prompts, and how far they agree with transformers (`agreement`).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/smollm2-135m-instruct-q4_1.json"
N_STEPS = 24
NEAR_TIE = 2e-3
TOP = 5
RULE = ("An implementation must produce the prompt_ids exactly, and its greedy continuation must "
        "equal greedy_ids for the first exact_prefix tokens (through the first step whose top1-top2 "
        "logit margin in the reference is under 2e-3, a near-tie where summation order may pick "
        "either). top5 holds the reference's five best ids and logits at each greedy step.")


def golden_prompts(names=None) -> list[dict]:
    """The default model's golden cases (name, text, prompt_ids) every record is run on, in the
    golden file's order; `names`: only those cases (None: all)."""
    golden = json.loads(GOLDEN.read_text())
    return [{"name": c["name"], "text": c["text"], "prompt_ids": c["prompt_ids"]}
            for c in golden["cases"] if names is None or c["name"] in names]


def sh(cmd, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw)


# ---------------------------------------------------------------- transformers

def load_hf(d: Path):
    from transformers import AutoModelForCausalLM
    m, info = AutoModelForCausalLM.from_pretrained(
        str(d), dtype=torch.float32, output_loading_info=True,
        attn_implementation="eager", experts_implementation="eager")
    m.eval()
    return m, {k: sorted(v) if isinstance(v, (set, list)) else str(v) for k, v in info.items()}


def hf_check(d: Path) -> dict:
    """Load, save again, compare: validates the writer's names and config against transformers."""
    from safetensors.numpy import load_file
    m, info = load_hf(d)
    problems = {k: v for k, v in info.items() if v}
    with tempfile.TemporaryDirectory() as t:
        m.save_pretrained(t)
        same_cfg = (d / "config.json").read_text() == (Path(t) / "config.json").read_text()
        same_gen = (d / "generation_config.json").read_text() == (Path(t) / "generation_config.json").read_text()
        a, b = load_file(str(d / "model.safetensors")), load_file(str(Path(t) / "model.safetensors"))
        same_names = sorted(a) == sorted(b)
        same_values = same_names and all(np.array_equal(a[k], b[k]) for k in a)
    return {"class": type(m).__name__, "loading_problems": problems,
            "resaved_config_json_identical": same_cfg,
            "resaved_generation_config_identical": same_gen,
            "resaved_tensor_names_identical": same_names,
            "resaved_tensor_values_identical": same_values,
            "n_tensors": len(a)}


def _top(logits: np.ndarray) -> tuple[list[int], list[float]]:
    ids = np.argsort(-logits, kind="stable")[:TOP]
    return [int(i) for i in ids], [float(logits[i]) for i in ids]


@torch.no_grad()
def greedy_hf(model, prompt_ids: list[int], n: int) -> dict:
    """Greedy decoding with the KV cache, as transformers' generate does, without stopping at eos."""
    out = model(input_ids=torch.tensor([prompt_ids]), use_cache=True)
    cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
    greedy, top5, lse = [], [], []
    for _ in range(n):
        logits = out.logits[0, -1].float().numpy()
        ids, vals = _top(logits)
        top5.append({"ids": ids, "logits": vals})
        lse.append(float(torch.logsumexp(out.logits[0, -1].double(), 0)))
        greedy.append(ids[0])
        out = model(input_ids=torch.tensor([[ids[0]]]), cache=cache, use_cache=True)
        cache = getattr(out, "past_key_values", None) or getattr(out, "cache", None)
    return {"greedy_ids": greedy, "top5": top5, "logsumexp": lse}


@torch.no_grad()
def _router_margins(model, spec: dict, ids: list[int]) -> dict:
    """The smallest routing margin over every MoE layer and position of `ids` (one forward):
    Qwen: p[k-1] - p[k] of the sorted softmax; GLM: the same on the group-masked biased sigmoid
    scores, and the group margin (topk_group-th vs next group score). A margin near float
    rounding means two implementations may route that token differently."""
    found = []

    def hook(mod, inp, _out):
        x = inp[0].reshape(-1, spec["hidden"]).float()
        logits = x @ mod.weight.float().T
        k = spec["n_expert_used"]
        if spec["family"] == "qwen3moe" or spec.get("hf_class") == "DeepseekV2ForCausalLM":
            p = torch.softmax(logits, -1)
            s = torch.sort(p, -1, descending=True).values
            found.append(("expert", (s[:, k - 1] - s[:, k])))
            return
        sc = torch.sigmoid(logits) + mod.e_score_correction_bias.float()
        g, tg = spec["n_group"], spec["topk_group"]
        grp = sc.view(-1, g, spec["n_expert"] // g).topk(2, -1).values.sum(-1)
        gs = torch.sort(grp, -1, descending=True).values
        if tg < g:
            found.append(("group", gs[:, tg - 1] - gs[:, tg]))
        keep = torch.zeros_like(grp).scatter_(1, torch.topk(grp, tg, -1).indices, 1.0)
        mask = keep.unsqueeze(-1).expand(-1, g, spec["n_expert"] // g).reshape(-1, spec["n_expert"])
        masked = sc.masked_fill(mask == 0, float("-inf"))
        s = torch.sort(masked, -1, descending=True).values
        found.append(("expert", s[:, k - 1] - s[:, k]))

    hs = [m.register_forward_hook(hook) for name, m in model.named_modules() if name.endswith("mlp.gate")]
    try:
        model(input_ids=torch.tensor([ids]), use_cache=False)
    finally:
        for h in hs:
            h.remove()
    best = {"expert": float("inf"), "group": float("inf")}
    for kind, v in found:
        best[kind] = min(best[kind], float(v.min()))
    return {k: (v if v != float("inf") else None) for k, v in best.items()}


def reference_cases(model, tok, spec: dict, prompts: list[dict]) -> list[dict]:
    cases = []
    for p in prompts:
        g = greedy_hf(model, p["prompt_ids"], N_STEPS)
        margins = [t["logits"][0] - t["logits"][1] for t in g["top5"]]
        tie = next((i for i, m in enumerate(margins) if m < NEAR_TIE), None)
        path = p["prompt_ids"] + g["greedy_ids"][:-1]
        cases.append({
            "name": p["name"], "text": p["text"], "prompt_ids": p["prompt_ids"],
            "greedy_ids": g["greedy_ids"],
            "greedy_text": tok.decode(g["greedy_ids"]),
            "top5": g["top5"],
            "near_tie_step": tie,
            "exact_prefix": N_STEPS if tie is None else tie + 1,
            "min_top1_margin": float(min(margins)),
            "router_margin": _router_margins(model, spec, path),
            "logsumexp": g["logsumexp"],
        })
    return cases


# ---------------------------------------------------------------- llama.cpp

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _post(url: str, body: dict) -> dict:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.loads(r.read())


def llama_server_cases(server_bin: Path, gguf: Path, prompts: list[dict], log: Path) -> tuple[list[dict], list[str]]:
    """Greedy n steps per prompt through llama-server's /completion (token-id prompt, n_probs 5,
    logprobs of the raw logits)."""
    port = _free_port()
    cmd = [str(server_bin), "-m", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "-c", "1024", "-np", "1", "-t", "2", "--no-warmup",
           "-ctk", "f32", "-ctv", "f32", "-fa", "off"]   # F32 KV: F16 cache rows would cost ~1e-3
    with open(log, "w") as lf:
        proc = subprocess.Popen(cmd, stdout=lf, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        for _ in range(600):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except Exception:
                pass
            if proc.poll() is not None:
                raise RuntimeError(f"llama-server exited {proc.returncode}: see {log}")
            time.sleep(0.5)
        cases = []
        for p in prompts:
            body = {"prompt": p["prompt_ids"], "n_predict": N_STEPS, "temperature": 0.0,
                    "n_probs": TOP, "ignore_eos": True, "cache_prompt": False,
                    "return_tokens": True, "samplers": ["temperature"]}
            r = _post(f"http://127.0.0.1:{port}/completion", body)
            ids = [int(t) for t in r["tokens"]]
            assert len(ids) == N_STEPS, (p["name"], len(ids))
            # The server lists probabilities only for tokens that complete a UTF-8 character
            # (a token ending in part of one is held back with its probabilities): walk the
            # token ids and take each listed entry at its own token; the others stay None.
            top5: list[dict | None] = [None] * N_STEPS
            i = 0
            for x in r.get("completion_probabilities", []):
                while ids[i] != int(x["id"]):
                    i += 1
                top5[i] = {"ids": [int(t["id"]) for t in x["top_logprobs"]],
                           "logprobs": [float(t["logprob"]) for t in x["top_logprobs"]]}
                i += 1
            cases.append({"name": p["name"], "greedy_ids": ids, "top5": top5,
                          "steps_without_probs": [k for k, t in enumerate(top5) if t is None]})
        return cases, cmd
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def agreement(ref: dict, other: dict) -> dict:
    """How far `other` (llama.cpp) follows the reference's greedy ids, and the size of the
    logprob differences on the shared path."""
    a, b = ref["greedy_ids"], other["greedy_ids"]
    first_diff = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    n_same = len(a) if first_diff is None else first_diff
    tie = ref["near_tie_step"]
    ok = n_same >= (len(a) if tie is None else tie)   # ids must agree before the first near tie
    diffs = []
    for i in range(n_same):
        if other["top5"][i] is None:
            continue
        ref_lp = {t: l - ref["logsumexp"][i] for t, l in zip(ref["top5"][i]["ids"], ref["top5"][i]["logits"])}
        for t, lp in zip(other["top5"][i]["ids"], other["top5"][i]["logprobs"]):
            if t in ref_lp:
                diffs.append(abs(lp - ref_lp[t]))
    return {"same_ids_through": n_same, "first_diff_step": first_diff, "near_tie_step": tie,
            "within_rule": ok, "exact_prefix_met": n_same >= ref["exact_prefix"],
            "max_abs_logprob_diff": max(diffs) if diffs else None}


# ---------------------------------------------------------------- converter

CONVERT_WRAPPER = r'''
import sys
root = sys.argv.pop(1)
sys.path.insert(0, root)
sys.path.insert(1, root + "/gguf-py")
from conversion import glm
# GLM's set_vocab looks up GLM's own special tokens ([gMASK], <sop>, ...), which a checkpoint
# with another vocabulary lacks; take the plain byte-level BPE path instead.
glm.Glm4MoeModel.set_vocab = lambda self: self._set_vocab_gpt2()
glm.Glm4MoeLiteModel.set_vocab = lambda self: self._set_vocab_gpt2()
import convert_hf_to_gguf as c
sys.argv = ["convert_hf_to_gguf.py"] + sys.argv[1:]
c.main()
'''


def run_converter(llama_cpp: Path, spec: dict, hf_dir: Path, outtype: str, out: Path) -> list[str]:
    """convert_hf_to_gguf.py on hf_dir; GLM's classes (glm4moe, Glm4MoeLiteForCausalLM)
    through CONVERT_WRAPPER."""
    if spec["family"] == "glm4moe" or spec.get("hf_class") == "Glm4MoeLiteForCausalLM":
        wrapper = out.parent / "convert_glm_wrapper.py"
        wrapper.write_text(CONVERT_WRAPPER)
        cmd = [sys.executable, str(wrapper), str(llama_cpp), str(hf_dir), "--outtype", outtype, "--outfile", str(out)]
    else:
        cmd = [sys.executable, str(llama_cpp / "convert_hf_to_gguf.py"), str(hf_dir),
               "--outtype", outtype, "--outfile", str(out)]
    sh(cmd)
    return cmd


def compare_gguf(mine: Path, theirs: Path) -> dict:
    import gguf

    def kv(r):
        return {k: (tuple(int(t) for t in f.types), f.contents()) for k, f in r.fields.items()
                if not k.startswith("GGUF.")}
    a, b = gguf.GGUFReader(str(mine)), gguf.GGUFReader(str(theirs))
    ka, kb = kv(a), kv(b)
    ta, tb = {t.name: t for t in a.tensors}, {t.name: t for t in b.tensors}
    differing_tensors = []
    for n, t in ta.items():
        u = tb.get(n)
        if u is not None and (t.tensor_type != u.tensor_type or list(t.shape) != list(u.shape)
                              or not np.array_equal(np.asarray(t.data), np.asarray(u.data))):
            differing_tensors.append(n)
    return {
        "keys_only_in_writer": sorted(set(ka) - set(kb)),
        "keys_only_in_converter": sorted(set(kb) - set(ka)),
        "keys_differing": {k: [repr(ka[k][1])[:80], repr(kb[k][1])[:80]]
                           for k in ka if k in kb and ka[k] != kb[k]},
        "tensors_only_in_writer": sorted(set(ta) - set(tb)),
        "tensors_only_in_converter": sorted(set(tb) - set(ta)),
        "tensors_differing": differing_tensors,
        "n_tensors_identical": len([n for n in ta if n in tb]) - len(differing_tensors),
        "same_key_order": list(ka) == list(kb),
        "same_tensor_order": [t.name for t in a.tensors] == [t.name for t in b.tensors],
    }


# ---------------------------------------------------------------- main

def dumps(rec: dict) -> str:
    """JSON with one line per list of numbers (the records stay small and diffable)."""
    import re
    text = json.dumps(rec, indent=1, ensure_ascii=False)
    return re.sub(r"\[\s*([-0-9.eE+,\s]+?)\s*\]",
                  lambda m: "[" + ", ".join(x.strip() for x in m.group(1).split(",")) + "]", text) + "\n"



def versions(llama_cpp: Path, server_bin: Path) -> dict:
    import gguf
    import safetensors
    import transformers
    from importlib.metadata import version
    v = sh([str(server_bin), "--version"], stdin=subprocess.DEVNULL)
    return {"python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "numpy": np.__version__,
            "safetensors": safetensors.__version__, "gguf (reference venv)": version("gguf"),
            "llama.cpp": "0c1e570 (shared/peers/llama.cpp-0c1e570.tgz), "
                         + " ".join((v.stdout + v.stderr).split())[:160],
            "llama.cpp build": "cmake -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON "
                               "-DCMAKE_BUILD_TYPE=Release (CPU)",
            "machine": f"{platform.machine()} {os.cpu_count()} cores"}


def record_family(name: str, a, built: dict, prompts: list[dict], vers: dict) -> dict:
    from transformers import AutoTokenizer
    root = Path(a.work) / name
    spec = built["spec"]
    rec: dict = {"model": name, "rule": RULE, "n_steps": N_STEPS}
    rec["checkpoint"] = {
        "writer": "tools/refs/moe_checkpoint.py",
        "command": f"PYTHONPATH=. python -m tools.refs.moe_checkpoint OUT --family {name} --dequant-hf Q8_0",
        "spec": spec, "sha256": built["sha256"],
        "files": {"hf": "hf/", "F32": f"{name}-F32.gguf", "Q8_0": f"{name}-Q8_0.gguf",
                  "Q8_0 weights as HF": "hf-Q8_0-dequant/"},
    }
    print(f"[{name}] transformers check", flush=True)
    rec["hf_check"] = hf_check(root / "hf")
    conv = {}
    cdir = Path(a.work) / "converted"
    cdir.mkdir(exist_ok=True)
    for qt, outtype in (("F32", "f32"), ("Q8_0", "q8_0")):
        print(f"[{name}] converter {outtype}", flush=True)
        out = cdir / f"{name}-{qt}.gguf"
        cmd = run_converter(Path(a.llama_cpp), spec, root / "hf", outtype, out)
        conv[qt] = {"command": " ".join(Path(c).name if i < 2 else c for i, c in enumerate(cmd)),
                    "comparison": compare_gguf(root / f"{name}-{qt}.gguf", out)}
    rec["converter"] = conv
    tok = AutoTokenizer.from_pretrained(str(root / "hf"))
    refs, lcpp = {}, {}
    for qt, hf_dir in (("F32", root / "hf"), ("Q8_0", root / "hf-Q8_0-dequant")):
        print(f"[{name}] transformers greedy {qt}", flush=True)
        model, _ = load_hf(hf_dir)
        refs[qt] = {"file": f"{name}-{qt}.gguf" + (" and hf/" if qt == "F32" else ""),
                    "reference": f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) "
                                 f"on {'the HF folder (the same weights as the F32 GGUF)' if qt == 'F32' else 'the Q8_0 GGUF weights dequantized (hf-Q8_0-dequant/)'}",
                    "cases": reference_cases(model, tok, spec, prompts)}
        del model
        print(f"[{name}] llama-server {qt}", flush=True)
        cases, cmd = llama_server_cases(Path(a.llama_cpp) / "build-cpu/bin/llama-server",
                                        root / f"{name}-{qt}.gguf", prompts, Path(a.work) / f"{name}-{qt}-server.log")
        by = {c["name"]: c for c in refs[qt]["cases"]}
        for c in cases:
            c["agreement"] = agreement(by[c["name"]], c)
        lcpp[qt] = {"file": f"{name}-{qt}.gguf", "compared_with": f"references.{qt}",
                    "command": " ".join([Path(cmd[0]).name] + cmd[1:]).replace(str(root) + "/", "")
                               + f"; POST /completion {{prompt: ids, n_predict: {N_STEPS}, temperature: 0, "
                                 f"n_probs: {TOP}, ignore_eos: true, samplers: [temperature]}}",
                    "cases": cases}
    # llama.cpp's Q8_0 dot products quantize the activations to Q8_0 as well, which
    # transformers (and foldserve: float32 activations on unpacked blocks) do not; the same
    # dequantized weights in an F32 GGUF (converted from hf-Q8_0-dequant/) isolate that.
    print(f"[{name}] llama-server F32 file of the Q8_0 weights", flush=True)
    deq = cdir / f"{name}-Q8_0-dequant-F32.gguf"
    run_converter(Path(a.llama_cpp), spec, root / "hf-Q8_0-dequant", "f32", deq)
    cases, cmd = llama_server_cases(Path(a.llama_cpp) / "build-cpu/bin/llama-server", deq, prompts,
                                    Path(a.work) / f"{name}-Q8_0-dequant-server.log")
    by = {c["name"]: c for c in refs["Q8_0"]["cases"]}
    for c in cases:
        c["agreement"] = agreement(by[c["name"]], c)
    lcpp["Q8_0 weights as F32"] = {
        "file": f"convert_hf_to_gguf.py hf-Q8_0-dequant/ --outtype f32 (the Q8_0 file's weights in F32)",
        "compared_with": "references.Q8_0", "cases": cases}
    rec["references"] = refs
    rec["llama_cpp"] = lcpp
    rec["tools"] = vers
    rec["record_command"] = f"{sys.executable} tools/refs/record_moe.py --llama-cpp {a.llama_cpp} --family {name}"
    return rec


def main(argv=None) -> None:
    import moe_checkpoint as mc   # beside this file; the spec only (no tokenizer, no server imports)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", nargs="+", default=[n for n in mc.FAMILIES if n not in mc.K_QUANT_FAMILIES])
    ap.add_argument("--llama-cpp", required=True, help="llama.cpp source tree with build-cpu/bin/llama-server")
    ap.add_argument("--work", default="/tmp/moe-refs-work")
    ap.add_argument("--out", default=str(ROOT / "tests/data/moe"))
    ap.add_argument("--writer-python", default="/work/main/.venv/bin/python")
    ap.add_argument("--prompts", nargs="*", default=None, help="golden case names (default: all)")
    a = ap.parse_args(argv)
    torch.set_num_threads(2)
    prompts = golden_prompts(a.prompts)
    shutil.rmtree(a.work, ignore_errors=True)
    Path(a.work).mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = sh([a.writer_python, "-m", "tools.refs.moe_checkpoint", a.work, "--family", *a.family,
            "--dequant-hf", "Q8_0"], cwd=ROOT, env=env)
    sha: dict[str, dict] = {n: {} for n in a.family}
    for line in r.stdout.splitlines():
        h, path = line.split("  ", 1)
        rel = Path(path).relative_to(a.work)
        sha[rel.parts[0]][str(Path(*rel.parts[1:]))] = h
    vers = versions(Path(a.llama_cpp), Path(a.llama_cpp) / "build-cpu/bin/llama-server")
    Path(a.out).mkdir(parents=True, exist_ok=True)
    for name in a.family:
        spec = mc.spec_dict(mc.FAMILIES[name])
        rec = record_family(name, a, {"spec": spec, "sha256": sha[name]}, prompts, vers)
        p = Path(a.out) / f"{name}.json"
        p.write_text(dumps(rec), encoding="utf-8")
        print(f"wrote {p}", flush=True)
        for qt, block in rec["llama_cpp"].items():
            for c in block["cases"]:
                ag = c["agreement"]
                print(f"  {qt:5s} {c['name']:11s} same through {ag['same_ids_through']:2d}/{N_STEPS} "
                      f"tie {ag['near_tie_step']} within_rule {ag['within_rule']} "
                      f"max|dlogprob| {ag['max_abs_logprob_diff']}")


if __name__ == "__main__":
    # run as a script: sys.path[0] is tools/refs/, not the checkout, whose `kernels`
    # package would shadow the `kernels` package transformers imports
    main()
