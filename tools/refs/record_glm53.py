"""Record GLM-5.3-Flash's references from transformers (glm5_next) into tests/data/glm53/.

    /work/venv-ref/bin/python tools/refs/record_glm53.py [--out tests/data/glm53]

Needs torch + transformers 5.25 (the reference venv, not the project's). Records:
- `mhc_case.json`: one mHC block on seeded inputs (tools/refs/glm53_cases.py, their sha256
  kept): transformers' Glm5NextTextHyperConnection (pre / post / comb and the collapsed block
  input), the decoder layer's post-mix (post y + comb^T @ residual) and Glm5NextTextHyperHead,
  float32: the definition test's reference for kernels/mhc.py.
- `dsa_case.json`: transformers' Glm5NextTextIndexer (no cache, no padding) on seeded inputs
  (glm53_cases.DSA): every query's top-k token indices (pools then the tail, -1 padding) and
  the pooled keys (get_pooled_states): the definition test's reference for kernels/dsa.py.
- `glm53-tiny.json`: the tiny checkpoint (tools/refs/glm53_checkpoint.py: numpy + safetensors,
  the same bytes in the project's venv, where the tests regenerate it and compare the sha256
  recorded here) through transformers float32 (eager attention): `hf_check` (the loading
  problems: only the image part, not written, is missing), `references` in the golden file's
  format and rule (tools/refs/record_qwen3next.py's PROMPTS, greedy N steps with the cache:
  the prompt through the chunked KDA, each step through the recurrent one), and `routes` (the
  prompt's last logits through the prompt path and token by token); `gguf`: the F32 GGUF
  `glm5-next` of the same weights (glm53_checkpoint.write_gguf: the gguf package under
  llama.cpp's names and keys; its converter at this commit stops on the folder transformers
  saves), its sha256, and llama-server's greedy ids and top-5 logprobs on it
  (tools/refs/record_moe.py's llama_server_cases), with how far they follow transformers'.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import platform
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]


def _cases():
    """tools/refs/glm53_cases.py by its path (the repository root stays off sys.path: its
    `kernels` package would hide the one transformers imports)."""
    spec = importlib.util.spec_from_file_location("glm53_cases", ROOT / "tools/refs/glm53_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _floats(t) -> list:
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t, np.float32).astype(float).tolist()


def record_mhc(cases) -> dict:
    import transformers
    from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig
    from transformers.models.glm5_next.modeling_glm5_next import (
        Glm5NextTextHyperConnection, Glm5NextTextHyperHead)
    c = cases.MHC
    x = cases.mhc_inputs(c)
    cfg = Glm5NextTextConfig(hidden_size=c["D"], hc_mult=c["N"], hc_eps=c["hc_eps"],
                             hc_sinkhorn_iters=c["iters"], rms_norm_eps=c["norm_eps"],
                             num_hidden_layers=4)
    hc = Glm5NextTextHyperConnection(cfg).float()
    with torch.no_grad():
        hc.fn.copy_(torch.from_numpy(x["fn"]))
        hc.base.copy_(torch.from_numpy(x["base"]))
        hc.scale.copy_(torch.from_numpy(x["scale"]))
        streams = torch.from_numpy(x["streams"])[None]          # [1, T, N, D]
        post, comb, collapsed = hc(streams)
        # the decoder layer's mix (modeling_glm5_next.Glm5NextTextDecoderLayer.forward)
        y = torch.from_numpy(x["y"])[None]
        out = post.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), streams)
        head = Glm5NextTextHyperHead()(out)
    return {
        "what": "one mHC block: transformers float32 Glm5NextTextHyperConnection on seeded "
                "inputs (tools/refs/glm53_cases.py MHC), its post-mix and the head's mean",
        "case": c, "inputs_sha256": cases.digest(x),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                     "python": platform.python_version()},
        "post": _floats(post[0]), "comb": _floats(comb[0]), "collapsed": _floats(collapsed[0]),
        "out": _floats(out[0]), "head": _floats(head[0]),
    }


def record_dsa(cases) -> dict:
    import transformers
    from transformers.models.glm5_next.configuration_glm5_next import Glm5NextTextConfig
    from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextIndexer
    c = cases.DSA
    x = cases.dsa_inputs(c)
    cfg = Glm5NextTextConfig(hidden_size=c["D"], q_lora_rank=c["Q"], index_n_heads=c["Hi"],
                             index_head_dim=c["Di"], index_kpool=c["kpool"],
                             index_topk=c["topk"], num_hidden_layers=4)
    ix = Glm5NextTextIndexer(cfg, 3).float()
    t = {k: torch.from_numpy(v) for k, v in x.items()}
    with torch.no_grad():
        ix.wq_b.weight.copy_(t["wq_b"])
        ix.wk.weight.copy_(t["wk"])
        ix.k_norm.weight.copy_(t["k_norm_w"])
        ix.k_norm.bias.copy_(t["k_norm_b"])
        ix.weights_proj.weight.copy_(t["weights_proj"])
        ix.index_kpool_compress_ape.copy_(t["ape"])
        ix.index_kpool_compress_gate.copy_(t["gate"])
        h, qr = t["h"][None], t["q_resid"][None]
        mask = torch.ones(1, c["T"], dtype=torch.bool)
        topk = ix(hidden_states=h, q_resid=qr, attention_mask=mask, cache=None)
        k = ix.k_norm(ix.wk(h))
        g = torch.nn.functional.linear(h, ix.index_kpool_compress_gate)
        packed = torch.cat([k, g, mask.float()[..., None]], dim=-1)
        pool_keys, pool_idx, pool_valid = ix.get_pooled_states(packed_states=packed)
    return {
        "what": "transformers float32 Glm5NextTextIndexer on seeded inputs "
                "(tools/refs/glm53_cases.py DSA): top-k token indices a query (-1: none), the "
                "pooled keys of the complete pools",
        "case": c, "inputs_sha256": cases.digest(x),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "topk_indices": topk[0].numpy().astype(int).tolist(),
        "pooled_keys": _floats(pool_keys[0][pool_valid[0]]),
    }


def _by_path(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / f"tools/refs/{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class IndexTies:
    """Watches transformers' DSA indexer topk calls (3-D scores [B, S, pools]) during a greedy
    run: `first_round`, the first forward (0: the prompt, j: the j-th step) in which a query's
    k-th and (k+1)-th best pool scores are equal (and not the masked minimum)."""

    def __enter__(self):
        self.round, self.first_round = -1, None
        self._topk = torch.Tensor.topk
        self._fwd = None
        me = self

        def topk(t, k, dim=-1, *a, **kw):
            r = me._topk(t, k, dim, *a, **kw)
            if t.dim() == 3 and t.shape[-1] > k and me.first_round is None:
                v = torch.sort(t.float(), dim=-1, descending=True).values
                lo = torch.finfo(t.dtype).min
                if bool(((v[..., k - 1] == v[..., k]) & (v[..., k] > lo)).any()):
                    me.first_round = me.round
            return r
        torch.Tensor.topk = topk
        from transformers import Glm5NextForConditionalGeneration as G
        self._cls, self._fwd = G, G.forward

        def fwd(model, *a, **kw):
            me.round += 1
            return me._fwd(model, *a, **kw)
        G.forward = fwd
        return self

    def __exit__(self, *exc):
        torch.Tensor.topk = self._topk
        self._cls.forward = self._fwd


def llama_cpp_cases(gguf: Path, cases: list) -> dict:
    """llama-server on the GGUF: its greedy ids against transformers' (`same_ids_through`)."""
    import subprocess
    rm = _by_path("record_moe")
    server = Path("/work/peers-build/llama.cpp/build-cpu/bin/llama-server")
    got, cmd = rm.llama_server_cases(server, gguf, cases, gguf.with_suffix(".llama-server.log"))
    for g, c in zip(got, cases):
        a, b = g["greedy_ids"], c["greedy_ids"]
        g["same_ids_through"] = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), len(a))
        g["within_rule"] = g["same_ids_through"] >= c["exact_prefix"]
    v = subprocess.run([str(server), "--version"], text=True, capture_output=True,
                       stdin=subprocess.DEVNULL)
    return {"command": " ".join([server.name] + cmd[1:2] + ["GGUF"] + cmd[3:]),
            "llama_cpp": " ".join((v.stdout + v.stderr).split())[:160], "cases": got}


def record_model(out: Path) -> Path:
    import tempfile
    import transformers
    from transformers import Glm5NextForConditionalGeneration
    gc = _by_path("glm53_checkpoint")
    rq = _by_path("record_qwen3next")
    with tempfile.TemporaryDirectory() as t:
        d = Path(t) / "hf"
        sha = gc.write(d)
        model, info = Glm5NextForConditionalGeneration.from_pretrained(
            str(d), dtype=torch.float32, output_loading_info=True, attn_implementation="eager")
        model.eval()
        info = {k: sorted(map(str, v)) if isinstance(v, (set, list)) else str(v)
                for k, v in info.items()}
        problems = {k: v for k, v in info.items() if v}
        not_image = {k: [n for n in v if "visual" not in n] for k, v in problems.items()
                     if isinstance(v, list)}
        cases, routes = [], []
        for p in rq.PROMPTS:
            with IndexTies() as ties:
                greedy, top5 = rq.greedy_hf(model, p["prompt_ids"], rq.N_STEPS)
            margins = [s["logits"][0] - s["logits"][1] for s in top5]
            tie = next((i for i, m in enumerate(margins) if m < rq.NEAR_TIE), None)
            exact = rq.N_STEPS if tie is None else tie + 1
            # a tie at the indexer's choice (two pools' scores equal at the k-th place: both
            # zero after the ReLU, typically) in the forward that makes step j's logits:
            # transformers' topk picks either, foldserve the earlier pool; steps from j on
            # follow that pick, so the exact prefix ends before j
            index_tie = ties.first_round
            if index_tie is not None:
                exact = min(exact, index_tie)
            cases.append({"name": p["name"], "prompt_ids": p["prompt_ids"], "greedy_ids": greedy,
                          "top5": top5, "near_tie_step": tie, "index_tie_step": index_tie,
                          "exact_prefix": exact, "min_top1_margin": float(min(margins))})
            with torch.no_grad():
                whole = model(input_ids=torch.tensor([p["prompt_ids"]]),
                              use_cache=True).logits[0, -1].numpy()
            step = rq.token_by_token(model, p["prompt_ids"])
            routes.append({"name": p["name"],
                           "max_abs_logit_diff": float(np.max(np.abs(whole - step))),
                           "bytes_equal": bool(np.array_equal(whole, step))})
        gguf = Path(t) / f"{gc.NAME}-F32.gguf"
        gguf_sha = gc.write_gguf(d, gguf)
        llama = llama_cpp_cases(gguf, cases)
    rec = {
        "rule": rq.RULE,
        "made_with": {"torch": torch.__version__, "transformers": transformers.__version__,
                      "python": platform.python_version()},
        "checkpoint": {"name": gc.NAME, "config": gc.CONFIG,
                       "sha256": {f"hf/{k}": v for k, v in sha.items()}},
        "hf_check": {"class": type(model).__name__, "loading_problems": problems,
                     "problems_outside_the_image_part": {k: v for k, v in not_image.items() if v}},
        "references": {"dtype": "float32", "attn_implementation": "eager",
                       "n_steps": rq.N_STEPS, "cases": cases},
        "routes": routes,
        "gguf": {"file": gguf.name, "sha256": gguf_sha, "written_by": "tools/refs/"
                 "glm53_checkpoint.py write_gguf (gguf package, llama.cpp's glm5-next names)",
                 "llama_cpp": llama},
    }
    path = out / f"{gc.NAME}.json"
    path.write_text(json.dumps(rec, indent=1) + "\n")
    print(path, {c["name"]: (c["exact_prefix"], c["index_tie_step"], round(c["min_top1_margin"], 4))
                 for c in cases},
          routes, rec["hf_check"]["problems_outside_the_image_part"],
          {g["name"]: g["same_ids_through"] for g in llama["cases"]})
    return path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=str(ROOT / "tests/data/glm53"))
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cases = _cases()
    (out / "mhc_case.json").write_text(json.dumps(record_mhc(cases), indent=1) + "\n")
    print("wrote", out / "mhc_case.json")
    (out / "dsa_case.json").write_text(json.dumps(record_dsa(cases)) + "\n")
    print("wrote", out / "dsa_case.json")
    torch.set_num_threads(1)
    record_model(out)


if __name__ == "__main__":
    main()
