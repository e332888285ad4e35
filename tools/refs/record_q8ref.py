"""Record the "Q8_0 q8_0" references beside the existing ones: transformers float32 on a Q8_0
file's weights dequantized (as each record's float reference for that file), with every product
whose weight is Q8_0 in that file taking its input rounded through ggml's q8_0 first (per 32
values d = amax / 127, q = roundf(x / d), x read back as q * f16(d)): the arithmetic llama.cpp's
CPU backend and foldserve's int8-x switch define for Q8_0 products.

    /work/venv-ref/bin/python tools/refs/record_q8ref.py [--family NAME ...] \
        [--float-x REGEX ...] [--work /tmp/q8ref-work]

Families (default: all): the moe records qwen3moe-tiny, glm4moe-tiny, deepseek3-tiny,
glm47flash-tiny, deepseek2lite-tiny (tests/data/moe/<name>.json: `references["Q8_0 q8_0"]`
beside `references.Q8_0`), and the Gated DeltaNet GGUF records qwen3next-tiny, qwen35moe-tiny
(tests/data/qwen3next/<name>-gguf.json: `references["Q8_0 q8_0"]`, beside llama.cpp's runs).
Nothing already in a record is changed: the file is read, the new block added, written back
(the recorder checks first that the record's text round-trips byte for byte).

The q8_0 rounding is the project's own: kernels/kquant_cpu.py's numpy `quantize_q8_0`, its
source read from that file and run here (this venv has no numba, so the module itself cannot be
imported). Which products: every F.linear call (nn.Linear and the experts' per-expert slices
of their 3-D weights) whose weight is Q8_0 in the file: the writers' rule (tools/refs/
moe_checkpoint.gguf_type, next_gguf.gguf_type) makes a 2-D / 3-D weight Q8_0 exactly when its
input width is a multiple of 32 and it is not one of the F32 tensors (the router
ffn_gate_inp, the shared expert's gate ffn_gate_inp_shexp); --float-x names weights left on
float x besides (default: the routers, the shared-expert gate, MLA's kv_b_proj, which
transformers applies to the latent while llama.cpp and foldserve multiply its halves k_b / v_b
in the absorbed form against other inputs). For qwen3next / qwen35moe the HF weights are taken
from the Q8_0 GGUF itself (next_gguf.write_gguf, sha256 equal to the record's), each element
traced back to its HF place, and where the file's columns are a permutation of HF's
(qwen35moe's ssm_out, v heads tiled) x is rounded in the file's order. qwen35moe's reference
runs transformers' Qwen3NextForCausalLM on its weights (the record's `transformers` block shows
Qwen3_5MoeForCausalLM equal to it, 0.0, on the same weights).

For each case: the reference in the golden format (greedy ids, top-5 logits, logsumexp a step,
near tie, exact prefix, router margin), and the agreement of llama.cpp's own Q8_0 run already
in the record (it quantizes x too) with it (`llama_cpp_Q8_0_agreement`), and with the float
reference for the same file beside it (`float_reference_agreement`).
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
MOE = ["qwen3moe-tiny", "glm4moe-tiny", "deepseek3-tiny", "glm47flash-tiny", "deepseek2lite-tiny"]
NEXT = {"qwen3next-tiny": "qwen3next", "qwen35moe-tiny": "qwen35moe"}
# the Q4_K_M files of those families holding Q8_0 tensors (references["Q4_K_M q8_0"])
Q4KM = ["glm4moe-tiny-Q4_K_M"]
KEY = "Q8_0 q8_0"
# weights whose product keeps float32 x (regexes on the transformers parameter name)
FLOAT_X = [r"\.mlp\.gate\.weight$", r"\.shared_expert_gate\.weight$", r"\.kv_b_proj\.weight$"]
# and per record (/work/notes/q8_products.md, q8all's list): qwen35moe's ssm_out, whose columns
# the loader untiles by v heads of 16 (half a block) and so dequantizes: float x in foldserve
# (llama.cpp multiplies it as Q8_0, x rounded in the file's tiled order)
FAMILY_FLOAT_X = {"qwen35moe-tiny": [r"\.linear_attn\.out_proj\.weight$"]}


def float_x_of(name: str, given: list[str] | None) -> list[str]:
    """The --float-x list, or by default FLOAT_X and the record's own FAMILY_FLOAT_X."""
    return list(given) if given is not None else FLOAT_X + FAMILY_FLOAT_X.get(name, [])


def _by_path(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"tools/refs/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, mod)
    spec.loader.exec_module(mod)
    return mod


def _project_quantizer():
    """kernels/kquant_cpu.py's `quantize_q8_0`, compiled from its source with numpy alone."""
    src = (ROOT / "kernels/kquant_cpu.py").read_text()
    fn = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == "quantize_q8_0")
    ns = {"np": np}
    exec(compile(ast.Module([fn], []), "kernels/kquant_cpu.py", "exec"), ns)
    return ns["quantize_q8_0"]


quantize_q8_0 = _project_quantizer()


def q8_0(x: torch.Tensor, perm: np.ndarray | None = None) -> torch.Tensor:
    """x (float32, last axis a multiple of 32) as a Q8_0 product reads it: quantize_q8_0's
    (q, dx) per row, returned as q * dx in float32 (exact: 8 by 11 significant bits). perm:
    the file's column order (x[..., perm] is rounded in blocks of 32, then put back)."""
    a = x.detach().to(torch.float32).numpy()
    shape = a.shape
    b = a.reshape(-1, shape[-1])
    if perm is not None:
        b = b[:, perm]
    q, dx = quantize_q8_0(b)
    y = (q.astype(np.float32).reshape(b.shape[0], -1, 32) * dx[:, :, None]).reshape(b.shape).astype(np.float32)
    if perm is not None:
        back = np.empty_like(y)
        back[:, perm] = y
        y = back
    return torch.from_numpy(np.ascontiguousarray(y.reshape(shape)))


def _pattern(name: str) -> str:
    return re.sub(r"\.\d+\.", ".N.", name)


@contextlib.contextmanager
def q8_0_activations(model, float_x=FLOAT_X, perms=None, only=None):
    """Within: every F.linear whose weight (or a slice of it: the experts' 3-D weights) is a
    parameter of `model` with an input width that is a multiple of 32 and a name matching none
    of `float_x` takes its input through q8_0 first (perms: {parameter name: the file's column
    order}); the others keep float32. only: a set of parameter names, the products taking q8_0
    x then being exactly those (a file of mixed types). Yields {"q8_0 x": {pattern: calls}, "float x": {...}}; a
    call on a weight that is no parameter of the model is refused. On leaving, counts["never"]: the
    patterns of the matrices no call used; counts["called"]: the names of those that were."""
    import torch.nn.functional as Fn
    perms = perms or {}
    spans = []
    for name, p in model.named_parameters():
        if p.dim() < 2:
            continue
        quant = p.shape[-1] % 32 == 0 and not any(re.search(r, name) for r in float_x)
        if only is not None:
            quant = name in only
        spans.append((p.data_ptr(), p.data_ptr() + p.numel() * p.element_size(), name, quant))
    orig = Fn.linear
    counts: dict = {"q8_0 x": {}, "float x": {}, "never": []}
    called = set()

    def linear(x, w, b=None):
        ptr = w.data_ptr()
        hit = next((s for s in spans if s[0] <= ptr < s[1]), None)
        if hit is None:
            raise RuntimeError(f"q8_0_activations: a product on a weight {tuple(w.shape)} that is no parameter")
        _, _, name, quant = hit
        called.add(name)
        side = counts["q8_0 x" if quant else "float x"]
        side[_pattern(name)] = side.get(_pattern(name), 0) + 1
        if quant:
            assert x.shape[-1] == w.shape[-1] and x.shape[-1] % 32 == 0, (name, x.shape)
            x = q8_0(x, perms.get(name))
        return orig(x, w, b)

    Fn.linear = linear
    try:
        yield counts
    finally:
        Fn.linear = orig
        counts["never"] = sorted({_pattern(n) for _, _, n, _ in spans if n not in called})
        counts["called"] = sorted(called)


def check_coverage(counts) -> None:
    """Every matrix of the model went through the patched product but the embedding (a row
    gather) and the GDN layers' short convolution (F32 in the file): a product computed
    another way (e.g. transformers' grouped experts kernels) would have escaped the rounding."""
    assert counts["q8_0 x"] and counts["float x"], counts
    assert set(counts["never"]) <= {"model.embed_tokens.weight", "model.layers.N.linear_attn.conv1d.weight"}, \
        counts["never"]


def _roundtrip(path: Path, dumps) -> dict:
    text = path.read_text(encoding="utf-8")
    rec = json.loads(text)
    assert dumps(rec) == text, f"{path}: the record's text does not round-trip; not rewriting it"
    return rec


def _step0_diff(a: dict, b: dict) -> float:
    """max |logit difference| over the ids both step-0 top-5 lists hold."""
    x = dict(zip(a["top5"][0]["ids"], a["top5"][0]["logits"]))
    y = dict(zip(b["top5"][0]["ids"], b["top5"][0]["logits"]))
    common = [t for t in x if t in y]
    return max(abs(x[t] - y[t]) for t in common) if common else None


def _block(rm, cases, counts, float_x, reference, lcpp_cases, float_cases, command, perms=None) -> dict:
    by_l = {c["name"]: c for c in lcpp_cases}
    by_f = {c["name"]: c for c in float_cases}
    ag_l, ag_f = {}, {}
    for c in cases:
        ag_l[c["name"]] = rm.agreement(c, by_l[c["name"]])
        f = by_f[c["name"]]
        first = next((i for i, (p, q) in enumerate(zip(c["greedy_ids"], f["greedy_ids"])) if p != q), None)
        ag_f[c["name"]] = {"same_ids_through": len(c["greedy_ids"]) if first is None else first,
                           "step0_top5_max_abs_logit_diff": _step0_diff(c, f)}
    return {"reference": reference,
            "products": {"q8_0 x": counts["q8_0 x"], "float x": counts["float x"],
                         "not a product": counts["never"],
                         "float_x_rule": "input width not a multiple of 32 (F16 / F32 in the file), or a "
                                         "name matching " + ", ".join(float_x),
                         **({"x rounded in the file's column order": sorted({_pattern(n) for n in perms})}
                            if perms else {})},
            "rounding": "kernels/kquant_cpu.py quantize_q8_0 (its source, run by tools/refs/record_q8ref.py): "
                        "per 32 values d = amax / 127, q = round half away from zero (x / d), x read as q * f16(d)",
            "command": command,
            "cases": cases,
            "llama_cpp_Q8_0_agreement": ag_l,
            "float_reference_agreement": ag_f}


def record_moe(name: str, a, rm, vers) -> None:
    fx = float_x_of(name, a.float_x)
    mc = _by_path("moe_checkpoint")
    path = Path(a.out_moe) / f"{name}.json"
    rec = _roundtrip(path, rm.dumps)
    if KEY in rec["references"] and not a.replace:
        print(f"[{name}] already has {KEY!r}; --replace to record it again", flush=True)
        return
    work = Path(a.work)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = rm.sh([a.writer_python, "-m", "tools.refs.moe_checkpoint", str(work), "--family", name,
               "--dequant-hf", "Q8_0"], cwd=ROOT, env=env)
    for line in r.stdout.splitlines():
        h, p = line.split("  ", 1)
        rel = str(Path(p).relative_to(work / name))
        assert rec["checkpoint"]["sha256"][rel] == h, f"{name}: {rel} is not the recorded file"
    root = work / name
    spec = mc.spec_dict(mc.FAMILIES[name])
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(root / "hf"))
    model, _ = rm.load_hf(root / "hf-Q8_0-dequant")
    prompts = rm.golden_prompts()
    print(f"[{name}] transformers greedy, Q8_0 products on q8_0 x", flush=True)
    with q8_0_activations(model, fx) as counts:
        cases = rm.reference_cases(model, tok, spec, prompts)
    check_coverage(counts)
    ref = (f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) on the Q8_0 "
           "GGUF weights dequantized (hf-Q8_0-dequant/, as references.Q8_0), every product whose weight is "
           "Q8_0 in the file taking its input rounded through q8_0 first (tools/refs/record_q8ref.py "
           "q8_0_activations; `products` lists which)")
    cmd = f"{a.python_name} tools/refs/record_q8ref.py --family {name}" + (
        " --float-x " + " ".join(repr(r) for r in fx) if a.float_x is not None else "")
    rec["references"][KEY] = _block(rm, cases, counts, fx, ref, rec["llama_cpp"]["Q8_0"]["cases"],
                                    rec["references"]["Q8_0"]["cases"], cmd)
    path.write_text(rm.dumps(rec), encoding="utf-8")
    _report(name, rec["references"][KEY])


# the GGUF kinds whose products take q8_0 x (foldserve's kernels/kquant_cpu.Q80_KINDS: Q8_0, and
# Q5_0 read as its Q8_0 repack; llama.cpp's ggml_vec_dot_q8_0_q8_0 / q5_0_q8_0)
Q80_KINDS = ("Q8_0", "Q5_0")


def q8_0_params(mc, spec, qtype: str, kinds_x8=Q80_KINDS) -> dict[str, set]:
    """{transformers parameter name: its GGUF kinds} for the parameters whose GGUF tensors in
    the `qtype` file are all of `kinds_x8` (moe_checkpoint's gguf_layout and gguf_type;
    per-expert names folded into the fused experts' parameters, which must then be of those
    kinds for every part)."""
    w = mc.hf_weights(spec)
    kinds: dict = {}
    for (g, hs), (_, arr) in zip(mc.gguf_layout(spec), mc.gguf_tensors(spec, w)):
        t = mc.gguf_type(g, arr, qtype, spec.n_layer)
        for h in hs:
            h = re.sub(r"\.experts\.\d+\.(gate|up)_proj\.weight$", ".experts.gate_up_proj", h)
            h = re.sub(r"\.experts\.\d+\.down_proj\.weight$", ".experts.down_proj", h)
            kinds.setdefault(h, set()).add(t)
    mixed = {h: k for h, k in kinds.items() if k & set(kinds_x8) and not k <= set(kinds_x8)}
    assert not mixed, mixed
    return {h: k for h, k in kinds.items() if k <= set(kinds_x8)}


def record_q4km(name: str, a, rm, vers) -> None:
    """references["Q4_K_M q8_0"]: transformers on the Q4_K_M file's weights dequantized (as
    references.Q4_K_M), every product whose weight is Q8_0 or Q5_0 in that file (llama-quantize's
    Q6_K and Q4_K fallbacks at rows not a multiple of 256) taking q8_0 x: foldserve's
    arithmetic with its int8-x switch (kernels/kquant_cpu.Q8_0_DEF, Q5_0 read as its Q8_0
    repack) and llama.cpp's (ggml_vec_dot_q8_0_q8_0, q5_0_q8_0)."""
    mc = _by_path("moe_checkpoint")
    path = Path(a.out_moe) / f"{name}.json"
    rec = _roundtrip(path, rm.dumps)
    key = "Q4_K_M q8_0"
    if key in rec["references"] and not a.replace:
        print(f"[{name}] already has {key!r}; --replace to record it again", flush=True)
        return
    work = Path(a.work)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = rm.sh([a.writer_python, "-m", "tools.refs.moe_checkpoint", str(work), "--family", name,
               "--qtype", "F32", "Q8_0", "Q4_K_M", "--dequant-hf", "Q4_K_M"], cwd=ROOT, env=env)
    for line in r.stdout.splitlines():
        h, p = line.split("  ", 1)
        rel = str(Path(p).relative_to(work / name))
        if rel in rec["checkpoint"]["sha256"] or rel.endswith(".gguf"):
            assert rec["checkpoint"]["sha256"].get(rel) == h, f"{name}: {rel} is not the recorded file"
    root = work / name
    spec = mc.spec_dict(mc.FAMILIES[name])
    by_kind = q8_0_params(mc, mc.FAMILIES[name], "Q4_K_M")
    only = set(by_kind)
    assert any("Q5_0" in k for k in by_kind.values()), "no Q5_0 product: not the file this records"
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(root / "hf"))
    model, _ = rm.load_hf(root / "hf-Q4_K_M-dequant")
    print(f"[{name}] Q4_K_M: transformers greedy, its Q8_0 and Q5_0 products ({sorted(only)}) on q8_0 x", flush=True)
    with q8_0_activations(model, [], only=only) as counts:
        cases = rm.reference_cases(model, tok, spec, rm.golden_prompts())
    check_coverage(counts)
    ref = (f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts) on the Q4_K_M "
           "GGUF weights dequantized (hf-Q4_K_M-dequant/, as references.Q4_K_M), every product whose weight is "
           "Q8_0 or Q5_0 in that file taking its input rounded through q8_0 first "
           "(tools/refs/record_q8ref.py; `products` lists which, `kinds` their GGUF kinds)")
    blk = _block(rm, cases, counts, ["(the file's F32 tensors)"], ref,
                 rec["llama_cpp"]["Q4_K_M"]["cases"], rec["references"]["Q4_K_M"]["cases"],
                 f"{a.python_name} tools/refs/record_q8ref.py --family {name}-Q4_K_M")
    blk["products"]["float_x_rule"] = "every tensor neither Q8_0 nor Q5_0 in the Q4_K_M file (F32)"
    blk["products"]["kinds"] = {h: sorted(k) for h, k in sorted(by_kind.items())}
    blk["llama_cpp_Q8_0_agreement_note"] = ("llama_cpp.Q4_K_M's run; it rounds x to q8_0 for its Q8_0 and "
                                           "Q5_0 products, as this reference (and foldserve) does")
    rec["references"][key] = blk
    path.write_text(rm.dumps(rec), encoding="utf-8")
    _report(name, blk)


def _trace(ng, nc, arch: str) -> tuple[dict, dict]:
    """GGUF tensor name -> the flat index, in the HF weights dict, of each of its elements
    (next_gguf's layout on index arrays; -1 where the element is computed, not moved), and the
    HF names by offset."""
    w = nc.weights()
    idx, off = {}, 0
    for k, v in w.items():
        idx[k] = np.arange(off, off + v.size, dtype=np.float64).reshape(v.shape)
        off += v.size
    assert off < 2 ** 24, off                     # exact through gguf_tensors' float32
    with np.errstate(all="ignore"):             # ssm_a's exp of an index: an F32 tensor, unused
        out = {n: t.astype(np.int64) for n, t in ng.gguf_tensors(idx, arch)}
    return out, {k: (int(idx[k].flat[0]), v.shape) for k, v in w.items()}


def next_model(name: str, fx: list[str], rec: dict, out_next: Path, t: Path):
    """(transformers Qwen3NextForCausalLM on the Q8_0 GGUF's weights, the file's column orders
    of the products taking q8_0 x {parameter: permutation}, the number of Q8_0 tensors); the
    HF folder and the GGUF are written under t and checked against the records' sha256."""
    import gguf
    arch = NEXT[name]
    nc = _by_path("next_checkpoint")
    ng = _by_path("next_gguf")
    rm = _by_path("record_moe")
    base = json.loads((Path(out_next) / "qwen3next-tiny.json").read_text())
    hf = t / "hf"
    assert {f"hf/{f}": h for f, h in nc.write(hf).items()} == base["checkpoint"]["sha256"], \
        "not the recorded Qwen3-Next checkpoint"
    q8 = t / f"{name}-Q8_0.gguf"
    assert ng.write_gguf(q8, "Q8_0", hf, arch=arch) == rec["files"][q8.name], f"{q8.name} is not the recorded file"
    w = {k: v.copy() for k, v in nc.weights().items()}
    flat = {k: v.reshape(-1) for k, v in w.items()}
    where, start = _trace(ng, nc, arch)
    order = sorted((s, k) for k, (s, _) in start.items())
    firsts = np.array([s for s, _ in order])
    owner = lambda i: order[int(np.searchsorted(firsts, i, side="right")) - 1][1]
    perms, n_q8 = {}, 0
    for tensor in gguf.GGUFReader(str(q8)).tensors:
        if tensor.tensor_type != gguf.GGMLQuantizationType.Q8_0:
            continue
        n_q8 += 1
        ix = where[tensor.name]
        deq = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(ix.shape)
        hname = owner(ix.min())
        assert owner(ix.max()) == hname, tensor.name             # one HF weight (or part of one)
        local = ix - start[hname][0]
        assert len(np.unique(local)) == local.size, tensor.name
        flat[hname][local.reshape(-1)] = deq.reshape(-1).astype(np.float32)
        cols = w[hname].shape[-1]
        col = (local % cols).reshape(-1, ix.shape[-1])
        assert (col == col[0]).all(), tensor.name
        if not np.array_equal(col[0], np.arange(cols)):
            assert sorted(col[0].tolist()) == list(range(cols)), tensor.name
            perms[hname] = col[0].copy()
    # x in the file's column order only where the product takes q8_0 x
    perms = {k: v for k, v in perms.items() if not any(re.search(r, k) for r in fx)}
    model, info = rm.load_hf(hf)          # eager experts: their products through F.linear
    assert not any(v for v in info.values()), info
    params = dict(model.named_parameters())
    with torch.no_grad():
        for k, v in w.items():
            params[k].copy_(torch.from_numpy(v))
    return model, perms, n_q8


def record_next(name: str, a, rm, vers) -> None:
    fx = float_x_of(name, a.float_x)
    rq = _by_path("record_qwen3next")
    dumps = lambda r: json.dumps(r, indent=1) + "\n"
    path = Path(a.out_next) / f"{name}-gguf.json"
    rec = _roundtrip(path, dumps)
    if KEY in rec.get("references", {}) and not a.replace:
        print(f"[{name}] already has {KEY!r}; --replace to record it again", flush=True)
        return
    with tempfile.TemporaryDirectory() as t:
        model, perms, n_q8 = next_model(name, fx, rec, Path(a.out_next), Path(t))
        prompts = [{"name": p["name"], "text": None, "prompt_ids": p["prompt_ids"]} for p in rq.PROMPTS]
        print(f"[{name}] transformers greedy, Q8_0 products on q8_0 x ({n_q8} Q8_0 tensors, "
              f"x in the file's column order for {sorted(perms)})", flush=True)
        cases = []
        with q8_0_activations(model, fx, perms) as counts:
            for p in prompts:
                g = rm.greedy_hf(model, p["prompt_ids"], rq.N_STEPS)
                margins = [s["logits"][0] - s["logits"][1] for s in g["top5"]]
                tie = next((i for i, m in enumerate(margins) if m < rq.NEAR_TIE), None)
                cases.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "greedy_ids": g["greedy_ids"],
                              "top5": g["top5"], "near_tie_step": tie,
                              "exact_prefix": rq.N_STEPS if tie is None else tie + 1,
                              "min_top1_margin": float(min(margins)),
                              "router_margin": rq.router_margin(model, p["prompt_ids"] + g["greedy_ids"][:-1]),
                              "logsumexp": g["logsumexp"]})
    check_coverage(counts)
    ref = (f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts; Qwen3NextForCausalLM) on the "
           f"{name}-Q8_0.gguf file's weights dequantized (read from the file, each element put back in its HF "
           "place), every product whose weight is Q8_0 in the file taking its input rounded through q8_0 first "
           "(tools/refs/record_q8ref.py q8_0_activations; `products` lists which)")
    cmd = f"{a.python_name} tools/refs/record_q8ref.py --family {name}" + (
        " --float-x " + " ".join(repr(r) for r in fx) if a.float_x is not None else "")
    # the float reference for this file: the record's transformers float32 path is the HF
    # checkpoint's (F32 weights); llama.cpp on the Q8_0 weights as F32 is the one the tests hold
    fl = [{"name": c["name"], "greedy_ids": c["greedy_ids"],
           "top5": [{"ids": s["ids"], "logits": s["logprobs"]} if s else {"ids": [], "logits": []} for s in c["top5"]]}
          for c in rec["llama_cpp"]["Q8_0 weights as F32"]["cases"]]
    blk = _block(rm, cases, counts, fx, ref, rec["llama_cpp"]["Q8_0"]["cases"], fl, cmd, perms)
    blk["float_reference_agreement_with"] = "llama_cpp['Q8_0 weights as F32'] (step-0 diff in logprob)"
    for c in cases:      # logprob differences: the float side is in logprobs
        lse = c["logsumexp"][0]
        x = {i: v - lse for i, v in zip(c["top5"][0]["ids"], c["top5"][0]["logits"])}
        f = next(q for q in fl if q["name"] == c["name"])["top5"][0]
        y = dict(zip(f["ids"], f["logits"]))
        common = [i for i in x if i in y]
        blk["float_reference_agreement"][c["name"]]["step0_top5_max_abs_logit_diff"] = None
        blk["float_reference_agreement"][c["name"]]["step0_top5_max_abs_logprob_diff"] = (
            max(abs(x[i] - y[i]) for i in common) if common else None)
    rec.setdefault("references", {})[KEY] = blk
    path.write_text(dumps(rec), encoding="utf-8")
    _report(name, blk)


# ------------------------------------------------------------------ glm5_next (GLM-5.3-Flash)
GLM53 = "glm53-tiny"
# matrices of the glm5_next model that are no product's weight (the embedding, a row gather; the
# KDA short convolutions; the indexer's pool position table, added) or belong to the image
# part the text model never runs
GLM53_NOT_PRODUCTS = (r"\.embed_tokens\.weight$", r"\.conv1d\.weight$", r"\.index_kpool_compress_ape$",
                      r"^model\.visual\.")


def glm53_model(rec: dict, t: Path):
    """(transformers Glm5NextForConditionalGeneration on the Q8_0 copy's weights, the parameter
    names whose GGUF tensor is Q8_0 in it, the Q8_0 file, {tensor: kind}): the tiny checkpoint
    (tools/refs/glm53_checkpoint.py) and its F32 GGUF are written under t and checked against
    the record's sha256, the Q8_0 copy made by tools/refs/kimi_checkpoint.q8_0_copy (the tests'
    glm53-tiny-Q8_0.gguf), every Q8_0 tensor's elements traced back to their HF place
    (glm53_checkpoint.gguf_tensors on index arrays) and replaced by the file's dequantized values;
    the HF folder of those weights written and loaded (eager attention, eager experts: every
    product an F.linear)."""
    import gguf
    from transformers import Glm5NextForConditionalGeneration
    gc = _by_path("glm53_checkpoint")
    kc = _by_path("kimi_checkpoint")
    hf = t / "hf"
    assert {f"hf/{k}": v for k, v in gc.write(hf).items()} == rec["checkpoint"]["sha256"], \
        "not the recorded GLM-5.3 checkpoint"
    f32 = t / rec["gguf"]["file"]
    assert gc.write_gguf(hf, f32) == rec["gguf"]["sha256"], f"{f32.name} is not the recorded file"
    q8 = t / f"{gc.NAME}-Q8_0.gguf"
    made = kc.q8_0_copy(f32, q8)
    w = gc.weights()
    idx, off = {}, 0
    for k, v in w.items():
        idx[k] = np.arange(off, off + v.size, dtype=np.float64).reshape(v.shape)
        off += v.size
    with np.errstate(all="ignore"):              # ssm_a's -exp(index): F32, 1-D, not traced
        where = {n: a for n, a in gc.gguf_tensors(idx)}
    order = sorted((int(a.flat[0]), k) for k, a in idx.items())
    firsts = np.array([s for s, _ in order])
    owner = lambda i: order[int(np.searchsorted(firsts, i, side="right")) - 1][1]
    flat = {k: v.copy().reshape(-1) for k, v in w.items()}
    kinds, parts = {}, {}
    for tensor in gguf.GGUFReader(str(q8)).tensors:
        kinds[tensor.name] = tensor.tensor_type.name
        if tensor.tensor_type != gguf.GGMLQuantizationType.Q8_0:
            continue
        ix = where[tensor.name].astype(np.int64)
        deq = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type).reshape(ix.shape)
        names = {owner(int(i)) for i in np.unique(ix)}
        for hname in names:
            parts.setdefault(hname, set()).add(tensor.name)
        for hname in names:                       # a stack of experts: one HF weight each
            lo = idx[hname].flat[0]
            sel = (ix >= lo) & (ix < lo + w[hname].size)
            local = (ix[sel] - int(lo)).reshape(-1)
            assert len(np.unique(local)) == local.size == w[hname].size, (tensor.name, hname)
            flat[hname][local] = deq[sel].reshape(-1).astype(np.float32)
    assert sorted(made) == sorted(n for n, k in kinds.items() if k == "Q8_0"), "q8_0_copy's list"
    wq = {k: v.reshape(w[k].shape) for k, v in flat.items()}
    deq_dir = t / "hf-Q8_0-dequant"
    gc.th.write_folder(deq_dir, gc.CONFIG, wq, gc.nc.write_tokenizer)
    model, info = Glm5NextForConditionalGeneration.from_pretrained(
        str(deq_dir), dtype=torch.float32, output_loading_info=True, attn_implementation="eager",
        experts_implementation="eager")
    model.eval()
    missing = [n for v in info.values() if isinstance(v, (set, list)) for n in v if "visual" not in str(n)]
    assert not missing, missing
    # the saved names -> the model's parameters (experts.E.gate / up -> experts.gate_up_proj,
    # experts.E.down -> experts.down_proj, hc_attn_fn -> attn_hc.fn, q / k / v_conv1d -> conv1d,
    # f_a / f_b / A_log / dt_bias -> forget_gate.*), Q8_0 where every saved
    # weight behind it is
    params = dict(model.named_parameters())
    only: dict[str, set] = {}
    for k in w:
        if w[k].ndim < 2:                          # norms, biases, A_log: F32, no product
            assert k not in parts, k
            continue
        pname = re.sub(r"\.experts\.\d+\.(gate|up)_proj\.weight$", ".experts.gate_up_proj", k)
        pname = re.sub(r"\.experts\.\d+\.down_proj\.weight$", ".experts.down_proj", pname)
        pname = re.sub(r"\.hc_(attn|ffn)_(fn|base|scale)$", r".\1_hc.\2", pname)
        pname = re.sub(r"\.self_attn\.[qkv]_conv1d\.weight$", ".self_attn.conv1d.weight", pname)
        pname = re.sub(r"\.self_attn\.(f_a_proj\.weight|f_b_proj\.weight|A_log|dt_bias)$",
                       r".self_attn.forget_gate.\1", pname)
        assert pname in params, (k, pname)
        only.setdefault(pname, set()).add(k in parts)
    mixed = {p: v for p, v in only.items() if len(v) > 1}
    assert not mixed, f"a parameter part Q8_0, part not: {sorted(mixed)}"
    # the embedding is Q8_0 in the file but a row gather (no product, no x to round)
    q8_params = {p for p, v in only.items() if v == {True}
                 and not any(re.search(r, p) for r in GLM53_NOT_PRODUCTS)}
    for k in parts:                                # the values as loaded are the file's
        if ".experts." not in k:
            assert np.array_equal(params[k].detach().numpy(), wq[k]), k
    return model, q8_params, q8, kinds, gc.th.sha256_file(q8)


def check_coverage_glm53(counts, called: set, q8_params: set) -> None:
    """Refuses a run where a Q8_0 matrix escaped the rounding: every parameter that is Q8_0 in
    the file went through the patched F.linear (so took q8_0 x), and every matrix never seen
    by it is one of GLM53_NOT_PRODUCTS (a product computed another way, e.g. a grouped experts
    kernel or a matmul on the weight, would have escaped)."""
    escaped = sorted(q8_params - called)
    assert not escaped, f"Q8_0 matrices whose products escaped the q8_0 rounding: {escaped}"
    assert counts["q8_0 x"] and counts["float x"], counts
    bad = [n for n in counts["never"] if not any(re.search(r, n) for r in GLM53_NOT_PRODUCTS)]
    assert not bad, f"matrices never multiplied through F.linear: {bad}"


def glm53_cases(model, rm, rg, rq, q8_params=None, float_x=()):
    """The golden-format cases (record_glm53's: greedy with the cache, near ties, the indexer's
    pool ties) on the model; with q8_params, inside q8_0_activations(only=q8_params).
    Returns (cases, counts or None, called parameter names)."""
    cases, counts, called = [], None, set()
    cm = (q8_0_activations(model, list(float_x), only=q8_params) if q8_params is not None
          else contextlib.nullcontext())
    with cm as counts, torch.no_grad():
        for p in rq.PROMPTS:
            with rg.IndexTies() as ties:
                g = rm.greedy_hf(model, p["prompt_ids"], rq.N_STEPS)
            greedy, top5 = g["greedy_ids"], g["top5"]
            margins = [s["logits"][0] - s["logits"][1] for s in top5]
            tie = next((i for i, m in enumerate(margins) if m < rq.NEAR_TIE), None)
            exact = rq.N_STEPS if tie is None else tie + 1
            if ties.first_round is not None:       # record_glm53: the indexer's pool tie
                exact = min(exact, ties.first_round)
            cases.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "greedy_ids": greedy,
                          "top5": top5, "near_tie_step": tie, "index_tie_step": ties.first_round,
                          "exact_prefix": exact, "min_top1_margin": float(min(margins)),
                          "logsumexp": g["logsumexp"]})
    if counts is not None:
        called = set(counts["called"])
    return cases, counts, called


def record_glm53(a, rm, vers) -> None:
    """tests/data/glm53/glm53-tiny.json's `q8_0` block: the Q8_0 copy (its sha256 and Q8_0
    tensors), transformers float32 on its weights dequantized with float x (references.Q8_0:
    what foldserve's TF_Q8_0_X=float computes) and with every product whose weight is Q8_0 in
    the file taking q8_0 x (references["Q8_0 q8_0"]: foldserve's default), and llama-server's
    own run on the Q8_0 file (it rounds x to q8_0 for its Q8_0 products)."""
    rg = _by_path("record_glm53")
    rq = _by_path("record_qwen3next")
    dumps = lambda r: json.dumps(r, indent=1) + "\n"
    path = Path(a.out_glm53) / f"{GLM53}.json"
    rec = _roundtrip(path, dumps)
    if "q8_0" in rec and not a.replace:
        print(f"[{GLM53}] already has its q8_0 block; --replace to record it again", flush=True)
        return
    fx = list(a.float_x) if a.float_x is not None else []
    with tempfile.TemporaryDirectory() as t:
        model, q8_params, q8, kinds, sha = glm53_model(rec, Path(t))
        q8_params -= {p for p in q8_params if any(re.search(r, p) for r in fx)}
        print(f"[{GLM53}] Q8_0 parameters: {sorted({_pattern(p) for p in q8_params})}", flush=True)
        print(f"[{GLM53}] transformers greedy on the Q8_0 weights, float x", flush=True)
        fcases, _, _ = glm53_cases(model, rm, rg, rq)
        print(f"[{GLM53}] transformers greedy on the Q8_0 weights, Q8_0 products on q8_0 x", flush=True)
        cases, counts, called = glm53_cases(model, rm, rg, rq, q8_params)
        check_coverage_glm53(counts, called, q8_params)
        print(f"[{GLM53}] llama-server on the Q8_0 copy", flush=True)
        llama = rg.llama_cpp_cases(q8, cases)
    made_cmd = f"{a.python_name} tools/refs/record_q8ref.py --family {GLM53}" + (
        " --float-x " + " ".join(repr(r) for r in fx) if fx else "")
    base = (f"transformers {vers['transformers']} float32 CPU (eager attention, eager experts; "
            "Glm5NextForConditionalGeneration) on the Q8_0 copy's weights dequantized (each Q8_0 "
            "tensor's elements put back in their HF place)")
    ag = {}
    for c, g in zip(cases, llama["cases"]):
        ag[c["name"]] = rm.agreement(c, g)
    rec["q8_0"] = {
        "file": q8.name, "sha256": sha,
        "written_by": "tools/refs/kimi_checkpoint.py q8_0_copy of the F32 GGUF (gguf-py's Q8_0 quantizer; "
                      "Q8_0_KEEP_F32 kept F32)",
        "tensor_types": {k: v for k, v in sorted(kinds.items()) if v != "F32"},
        "references": {
            "Q8_0": {"reference": base + ", every product on float32 x (foldserve's TF_Q8_0_X=float)",
                     "command": made_cmd, "cases": fcases},
            KEY: {"reference": base + ", every product whose weight is Q8_0 in the file taking its input "
                                      "rounded through q8_0 first (tools/refs/record_q8ref.py "
                                      "q8_0_activations; `products` lists which)",
                  "products": {"q8_0 x": counts["q8_0 x"], "float x": counts["float x"],
                               "not a product": counts["never"],
                               "float_x_rule": "every weight not Q8_0 in the file (F32: Q8_0_KEEP_F32, or a "
                                               "width not a multiple of 32)" + (
                                                   ", or a name matching " + ", ".join(fx) if fx else "")},
                  "rounding": "kernels/kquant_cpu.py quantize_q8_0 (its source, run by tools/refs/"
                              "record_q8ref.py): per 32 values d = amax / 127, q = round half away from "
                              "zero (x / d), x read as q * f16(d)",
                  "command": made_cmd, "cases": cases,
                  "float_reference_agreement": {
                      c["name"]: {"same_ids_through": next((i for i, (p, q) in enumerate(
                          zip(c["greedy_ids"], f["greedy_ids"])) if p != q), len(c["greedy_ids"])),
                          "step0_top5_max_abs_logit_diff": _step0_diff(c, f)}
                      for c, f in zip(cases, fcases)}}},
        "llama_cpp": {**llama, "agreement_with_Q8_0_q8_0": ag},
    }
    path.write_text(dumps(rec), encoding="utf-8")
    _report(GLM53, rec["q8_0"]["references"][KEY] | {"llama_cpp_Q8_0_agreement": ag})


def _report(name, blk) -> None:
    print(f"[{name}] {KEY}: q8_0 x {blk['products']['q8_0 x']}", flush=True)
    print(f"[{name}] float x {blk['products']['float x']}", flush=True)
    for c in blk["cases"]:
        ag, fa = blk["llama_cpp_Q8_0_agreement"][c["name"]], blk["float_reference_agreement"][c["name"]]
        print(f"  {c['name']:11s} exact_prefix {c['exact_prefix']:2d} min_margin {c['min_top1_margin']:.4f} | "
              f"llama.cpp Q8_0 same through {ag['same_ids_through']:2d} within_rule {ag['within_rule']} "
              f"max|dlogprob| {ag['max_abs_logprob_diff']} | float ref same through {fa['same_ids_through']:2d} "
              f"step0 {fa.get('step0_top5_max_abs_logit_diff') or fa.get('step0_top5_max_abs_logprob_diff')}",
              flush=True)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--family", nargs="+", default=MOE + list(NEXT) + Q4KM + [GLM53],
                    choices=MOE + list(NEXT) + Q4KM + [GLM53])
    ap.add_argument("--float-x", nargs="*", default=None,
                    help="regexes on transformers parameter names whose products keep float32 x "
                         "(default: FLOAT_X and the record's FAMILY_FLOAT_X)")
    ap.add_argument("--work", default="/tmp/q8ref-work")
    ap.add_argument("--out-moe", default=str(ROOT / "tests/data/moe"))
    ap.add_argument("--out-next", default=str(ROOT / "tests/data/qwen3next"))
    ap.add_argument("--out-glm53", default=str(ROOT / "tests/data/glm53"))
    ap.add_argument("--writer-python", default="/work/main/.venv/bin/python")
    ap.add_argument("--replace", action="store_true", help="record a case that has the block again")
    a = ap.parse_args(argv)
    a.python_name = "/work/venv-ref/bin/python"
    torch.set_num_threads(2)
    rm = _by_path("record_moe")
    import transformers
    vers = {"transformers": transformers.__version__}
    shutil.rmtree(a.work, ignore_errors=True)
    Path(a.work).mkdir(parents=True)
    for name in a.family:
        if name in Q4KM:
            record_q4km(name[:-len("-Q4_K_M")], a, rm, vers)
        elif name == GLM53:
            record_glm53(a, rm, vers)
        else:
            (record_moe if name in MOE else record_next)(name, a, rm, vers)


if __name__ == "__main__":
    main()
