"""Record GLM-5.3-Flash's references from transformers (glm5_next) into tests/data/glm53/.

    /work/venv-ref/bin/python tools/refs/record_glm53.py [--out tests/data/glm53]

Needs torch + transformers 5.25 (the reference venv, not the project's). Records:
- `mhc_case.json`: one mHC block on seeded inputs (tools/refs/glm53_cases.py, their sha256
  kept): transformers' Glm5NextTextHyperConnection (pre / post / comb and the collapsed block
  input), the decoder layer's post-mix (post y + comb^T @ residual) and Glm5NextTextHyperHead,
  float32: the definition test's reference for kernels/mhc.py.
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


if __name__ == "__main__":
    main()
