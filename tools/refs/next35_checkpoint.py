"""The tiny Qwen3.5-MoE checkpoint (HF `Qwen3_5MoeForCausalLM`, the text model): the tiny
Qwen3-Next checkpoint's weights (tools/refs/next_checkpoint.py) under Qwen3.5's layout, so the
two are one model in exact arithmetic:

    in_proj_qkv  [q all k heads | k all | v all v heads]   <- in_proj_qkvz's per-k-head rows
    in_proj_z    [z all v heads]
    in_proj_b, in_proj_a  [v heads]                        <- in_proj_ba's per-k-head rows

(v head h belongs to k head h // r in both), the rest as it is; the config is Qwen3.5's
(model_type qwen3_5_moe_text, interleaved MRoPE with mrope_section [1, 1, 0]: a text token's
three positions are equal, so it is the plain partial RoPE; no intermediate_size,
decoder_sparse_step, norm_topk_prob or mlp_only_layers: the router always renormalises).

    PYTHONPATH=$PWD .venv/bin/python tools/refs/next35_checkpoint.py OUT_DIR
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

try:
    from tools.refs import next_checkpoint as nc
except ImportError:            # run by path from a reference venv
    import importlib.util
    _s = importlib.util.spec_from_file_location("next_checkpoint", Path(__file__).with_name("next_checkpoint.py"))
    nc = importlib.util.module_from_spec(_s)
    _s.loader.exec_module(nc)

NAME = "qwen35moe-tiny"
DROP = ("intermediate_size", "decoder_sparse_step", "norm_topk_prob", "mlp_only_layers")
CONFIG = {**{k: v for k, v in nc.CONFIG.items() if k not in DROP},
          "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
          "rope_parameters": {**nc.CONFIG["rope_parameters"], "mrope_section": [1, 1, 0],
                              "mrope_interleaved": True}}


def weights() -> dict[str, np.ndarray]:
    c = nc.CONFIG
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"],
                      c["linear_key_head_dim"], c["linear_value_head_dim"])
    r = nv // nk
    w = nc.weights()
    for name in [n for n in w if n.endswith("in_proj_qkvz.weight")]:
        p = name[:-len("in_proj_qkvz.weight")]
        x = w.pop(name)
        d = x.shape[1]
        x = x.reshape(nk, 2 * dk + 2 * r * dv, d)
        flat = lambda t: np.ascontiguousarray(t.reshape(-1, d))
        w[p + "in_proj_qkv.weight"] = np.concatenate(
            [flat(x[:, :dk]), flat(x[:, dk:2 * dk]), flat(x[:, 2 * dk:2 * dk + r * dv])])
        w[p + "in_proj_z.weight"] = flat(x[:, 2 * dk + r * dv:])
        ba = w.pop(p + "in_proj_ba.weight").reshape(nk, 2 * r, d)
        w[p + "in_proj_b.weight"] = flat(ba[:, :r])
        w[p + "in_proj_a.weight"] = flat(ba[:, r:])
    return w


def write(out_dir) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    return nc.th.write_folder(out_dir, CONFIG, weights(), nc.write_tokenizer)


_BUILT: dict = {}


def build_once() -> tuple[Path, dict]:
    """write() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once: for tests."""
    return nc.th.build_once(_BUILT, NAME, write)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    for f, h in write(ap.parse_args().out_dir).items():
        print(h, f)
