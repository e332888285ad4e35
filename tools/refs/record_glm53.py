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


if __name__ == "__main__":
    main()
