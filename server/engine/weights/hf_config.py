"""A Hugging Face config.json -> ModelSpec."""
from __future__ import annotations

import json
import os

from server.shapes.spec import SUPPORTED_ARCHS, ModelSpec, UnsupportedModel, check_arch
from .loaded import WeightsError

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
}


def arch_of(cfg: dict, path: str) -> str:
    archs = cfg.get("architectures") or []
    model_type = cfg.get("model_type")
    for a in archs:
        if a in ARCHITECTURES:
            return ARCHITECTURES[a]
    if archs:
        raise UnsupportedModel(
            f"{path}: architecture {archs[0]!r} (model_type {model_type!r}) is not supported; "
            f"foldserve runs the llama family: {', '.join(ARCHITECTURES)}")
    if model_type is None:
        raise WeightsError(f"{path}: config.json names neither `architectures` nor `model_type`")
    return check_arch(model_type)


def rope_scaling_of(cfg: dict, path: str) -> tuple | None:
    rs = cfg.get("rope_scaling")
    if not rs:
        return None
    kind = rs.get("rope_type", rs.get("type"))
    if kind in (None, "default"):
        return None
    if kind != "llama3":
        raise WeightsError(f"{path}: rope_scaling type {kind!r} is not supported "
                           "(foldserve supports Llama 3.1 style `llama3` scaling only)")
    return (float(rs["factor"]), float(rs.get("low_freq_factor", 1.0)),
            float(rs.get("high_freq_factor", 4.0)),
            int(rs.get("original_max_position_embeddings", 8192)))


def read_config(folder: str) -> dict:
    path = os.path.join(folder, "config.json")
    if not os.path.isfile(path):
        raise WeightsError(f"{folder}: no config.json; a Hugging Face model folder holds "
                           "config.json and *.safetensors")
    with open(path) as f:
        return json.load(f)


def spec_from_config(cfg: dict, path: str) -> ModelSpec:
    arch = arch_of(cfg, path)
    assert arch in SUPPORTED_ARCHS

    def need(key):
        if cfg.get(key) is None:
            raise WeightsError(f"{path}: config.json has no {key!r}")
        return cfg[key]

    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    return ModelSpec(
        arch=arch,
        n_layers=int(need("num_hidden_layers")),
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
        head_dim=int(cfg.get("head_dim") or d // n_heads),
        d_ff=int(need("intermediate_size")),
        vocab=int(need("vocab_size")),
        rope_theta=float(cfg.get("rope_theta", 10000.0)),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6 if arch.startswith("qwen") else 1e-5)),
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=arch == "qwen2",
        qk_norm=arch == "qwen3",
        rope_scaling=rope_scaling_of(cfg, path),
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
    )
