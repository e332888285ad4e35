"""The tiny GLM-5.3-Flash checkpoint (HF `Glm5NextForConditionalGeneration`, its text part):
config.json and model.safetensors written with numpy from seeded generators, under the names
transformers 5.25's save_pretrained writes (model.language_model.*: Kimi-Linear's KDA names
with A_log [H], hc_attn_fn / _base / _scale, self_attn.indexer.*, per-expert gate / up / down;
lm_head.weight); a tiny vision_config, its weights not written (foldserve reads the text part;
transformers initialises the image part, the only keys it reports missing). The tokenizer is
tools/refs/next_checkpoint.py's (512 ids, ChatML). The same bytes on every run (the tests
compare the sha256 with tests/data/glm53/glm53-tiny.json), so the files are regenerated, never
committed. Needs numpy, safetensors and tokenizers only.

The shape keeps GLM-5.3-Flash's pattern at a small size: KDA then sparse layers, layer 3 a full
indexer and layer 4 a sparse layer whose indexer is "shared" (it reads layer 3's choice:
transformers passes a choice on only to the next layer), index_kpool 4 and index_topk 16 so
the sparse pass starts past 19 rows, mHC's 4 streams, one dense MLP then the MoE.

    PYTHONPATH=$PWD .venv/bin/python tools/refs/glm53_checkpoint.py OUT_DIR   (OUT_DIR/hf)
"""
from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

NAME = "glm53-tiny"
LAYERS = ["linear_attention", "linear_attention", "linear_attention", "indexed_attention",
          "indexed_attention", "linear_attention", "linear_attention", "indexed_attention"]
INDEXERS = ["full", "full", "full", "full", "shared", "full", "full", "full"]
TEXT = {
    "model_type": "glm5_next_text",
    "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
    "moe_intermediate_size": 96, "num_hidden_layers": len(LAYERS),
    "num_attention_heads": 4, "num_key_value_heads": 4,
    "n_routed_experts": 8, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "routed_scaling_factor": 2.5, "norm_topk_prob": True, "n_group": 1, "topk_group": 1,
    "kv_lora_rank": 32, "q_lora_rank": 48, "qk_rope_head_dim": 0, "qk_nope_head_dim": 16,
    "v_head_dim": 16, "hidden_act": "silu", "rms_norm_eps": 1e-5,
    "max_position_embeddings": 512, "attention_bias": False, "attention_dropout": 0.0,
    "index_topk": 16, "index_head_dim": 16, "index_n_heads": 8, "index_kpool": 4,
    "index_kpool_always_select_tail": True,
    "layer_types": LAYERS, "indexer_types": INDEXERS,
    "mlp_layer_types": ["dense"] + ["sparse"] * (len(LAYERS) - 1),
    "swiglu_limit": 10.0, "linear_head_dim": 16, "linear_num_heads": 4,
    "linear_conv_kernel_dim": 4, "linear_lower_bound": -5.0,
    "hc_mult": 4, "hc_eps": 1e-6, "hc_sinkhorn_iters": 20,
    "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2, "tie_word_embeddings": False,
}
CONFIG = {
    "architectures": ["Glm5NextForConditionalGeneration"],
    "model_type": "glm5_next",
    "text_config": TEXT,
    "vision_config": {"model_type": "glm5_next_vision", "depth": 1, "hidden_size": 32,
                      "num_heads": 2, "intermediate_size": 64, "out_hidden_size": 64,
                      "projection_intermediate_size": 128},
    "tie_word_embeddings": False,
    "dtype": "float32",
}


def _rng(name: str) -> np.random.Generator:
    words = np.frombuffer(hashlib.sha256(f"{NAME}/{name}".encode()).digest(), "<u4").tolist()
    return np.random.default_rng(np.random.SeedSequence(words))


def weights() -> dict[str, np.ndarray]:
    """The text part's tensors by the names transformers saves (model.language_model.*)."""
    c = TEXT
    d, V, H = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    C, N, Vd, QL = c["kv_lora_rank"], c["qk_nope_head_dim"], c["v_head_dim"], c["q_lora_rank"]
    LH, LD, K = c["linear_num_heads"], c["linear_head_dim"], c["linear_conv_kernel_dim"]
    E, eff, ff = c["n_routed_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    Hi, Di, kp, hc = c["index_n_heads"], c["index_head_dim"], c["index_kpool"], c["hc_mult"]
    w: dict[str, np.ndarray] = {}
    P = "model.language_model."

    def put(name, shape, std, offset=0.0):
        w[name] = (_rng(name).standard_normal(shape) * std + offset).astype(np.float32)

    def lin(name, out_f, in_f, gain=1.0):
        put(name, (out_f, in_f), gain / np.sqrt(in_f))

    def mlp(p, f):
        lin(p + "gate_proj.weight", f, d)
        lin(p + "up_proj.weight", f, d)
        lin(p + "down_proj.weight", d, f)

    put(P + "embed_tokens.weight", (V, d), 1.0)
    put(P + "norm.weight", (d,), 0.1, 1.0)
    lin("lm_head.weight", V, d)
    for i, kind in enumerate(c["layer_types"]):
        p = P + f"layers.{i}."
        put(p + "input_layernorm.weight", (d,), 0.1, 1.0)
        put(p + "post_attention_layernorm.weight", (d,), 0.1, 1.0)
        for part in ("hc_attn", "hc_ffn"):
            m = (2 + hc) * hc
            put(p + f"{part}_fn", (m, hc * d), 1.0 / np.sqrt(hc * d))
            put(p + f"{part}_base", (m,), 0.5)
            w[p + f"{part}_scale"] = _rng(p + f"{part}_scale").uniform(0.5, 1.5, 3).astype(np.float32)
        a = p + "self_attn."
        if kind == "linear_attention":
            for x in "qkv":
                lin(a + f"{x}_proj.weight", LH * LD, d)
                put(a + f"{x}_conv1d.weight", (LH * LD, 1, K), 0.5)
            lin(a + "f_a_proj.weight", LD, d)
            lin(a + "f_b_proj.weight", LH * LD, LD)
            w[a + "A_log"] = np.log(_rng(a + "A_log").uniform(1.0, 16.0, LH)).astype(np.float32)
            dt = np.exp(_rng(a + "dt_bias").uniform(np.log(1e-3), np.log(1e-1), LH * LD))
            w[a + "dt_bias"] = (dt + np.log(-np.expm1(-dt))).astype(np.float32)
            lin(a + "b_proj.weight", LH, d)
            lin(a + "g_a_proj.weight", LD, d)
            lin(a + "g_b_proj.weight", LH * LD, LD)
            put(a + "o_norm.weight", (LD,), 0.1, 1.0)
            lin(a + "o_proj.weight", d, LH * LD)
        else:
            lin(a + "q_a_proj.weight", QL, d)
            put(a + "q_a_layernorm.weight", (QL,), 0.1, 1.0)
            lin(a + "q_b_proj.weight", H * N, QL)
            lin(a + "kv_a_proj_with_mqa.weight", C, d)
            put(a + "kv_a_layernorm.weight", (C,), 0.1, 1.0)
            lin(a + "kv_b_proj.weight", H * (N + Vd), C)
            lin(a + "o_proj.weight", d, H * Vd)
            if c["indexer_types"][i] == "full":
                x = a + "indexer."
                lin(x + "wq_b.weight", Hi * Di, QL, 2.0)
                lin(x + "wk.weight", Di, d, 2.0)
                put(x + "k_norm.weight", (Di,), 0.1, 1.0)
                put(x + "k_norm.bias", (Di,), 0.1)
                lin(x + "weights_proj.weight", Hi, d, 2.0)
                put(x + "index_kpool_compress_ape", (kp, Di), 0.5)
                lin(x + "index_kpool_compress_gate", Di, d)
        m = p + "mlp."
        if c["mlp_layer_types"][i] == "dense":
            mlp(m, ff)
            continue
        lin(m + "gate.weight", E, d, 2.0)
        put(m + "gate.e_score_correction_bias", (E,), 0.1)
        for e in range(E):
            mlp(m + f"experts.{e}.", eff)
        mlp(m + "shared_experts.", eff * c["n_shared_experts"])
    return w


def _next_checkpoint():
    import importlib.util
    spec = importlib.util.spec_from_file_location("next_checkpoint", Path(__file__).with_name("next_checkpoint.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def write(out_dir) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    from safetensors.numpy import save_file
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(CONFIG, indent=2, sort_keys=True) + "\n")
    save_file({k: np.ascontiguousarray(v) for k, v in sorted(weights().items())},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    nc = _next_checkpoint()
    nc.write_tokenizer(out)
    return {p.name: nc.sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}


_BUILT: dict = {}


def build_once() -> tuple[Path, dict]:
    """write() into a per-process temporary folder, once: for tests."""
    import tempfile
    if "hf" not in _BUILT:
        d = Path(tempfile.mkdtemp(prefix=f"foldserve-{NAME}-")) / "hf"
        _BUILT["hf"] = (d, write(d))
    return _BUILT["hf"]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="The tiny GLM-5.3-Flash checkpoint")
    ap.add_argument("out_dir")
    out = Path(ap.parse_args().out_dir)
    for f, h in write(out / "hf").items():
        print(h, f"hf/{f}")
