"""A Hugging Face config.json -> ModelSpec."""
from __future__ import annotations

import json
import os


from server.shapes.spec import MOE_ARCHS, SUPPORTED_ARCHS, ModelSpec, UnsupportedModel, check_arch
from .loaded import WeightsError

ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3ForCausalLM": "qwen3",
    "Qwen3MoeForCausalLM": "qwen3moe",
    "Glm4MoeForCausalLM": "glm4moe",
    "DeepseekV2ForCausalLM": "deepseek2",
    "DeepseekV3ForCausalLM": "deepseek2",
    "Glm4MoeLiteForCausalLM": "deepseek2",
    "Qwen3NextForCausalLM": "qwen3next",
    "Qwen3_5MoeForCausalLM": "qwen3next",     # Qwen3.5/3.6 MoE's text model: the same layers
    "GptOssForCausalLM": "gptoss",
    "KimiLinearForCausalLM": "kimilinear",
    "Glm5NextForConditionalGeneration": "glm5next",
}
MODEL_TYPES = {"qwen3_moe": "qwen3moe", "glm4_moe": "glm4moe", "deepseek_v2": "deepseek2",
               "deepseek_v3": "deepseek2", "glm4_moe_lite": "deepseek2", "qwen3_next": "qwen3next",
               "qwen3_5_moe_text": "qwen3next",
               "gpt_oss": "gptoss", "kimi_linear": "kimilinear",
               "glm5_next": "glm5next", "glm5_next_text": "glm5next"}


def arch_of(cfg: dict, path: str) -> str:
    archs = cfg.get("architectures") or []
    model_type = cfg.get("model_type")
    for a in archs:
        if a in ARCHITECTURES:
            return ARCHITECTURES[a]
    if archs:
        raise UnsupportedModel(
            f"{path}: architecture {archs[0]!r} (model_type {model_type!r}) is not supported; "
            f"foldserve runs: {', '.join(ARCHITECTURES)}")
    if model_type is None:
        raise WeightsError(f"{path}: config.json names neither `architectures` nor `model_type`")
    return check_arch(MODEL_TYPES.get(model_type, model_type))


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

    if arch == "glm5next":
        return glm5_spec(cfg, path)
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    if arch == "gptoss":
        return gptoss_spec(cfg, path, need)
    if arch == "deepseek2":
        return mla_spec(cfg, path, need)
    if arch == "qwen3next":
        return next_spec(cfg, path, need)
    if arch == "kimilinear":
        return kimi_spec(cfg, path, need)
    if arch in MOE_ARCHS:
        return moe_spec(cfg, path, arch, need)
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


def rope_theta_of(cfg: dict) -> float:
    """rope_theta at the top (transformers 4) or in rope_parameters (transformers 5)."""
    rp = cfg.get("rope_parameters") or {}
    return float(cfg.get("rope_theta") or rp.get("rope_theta") or 10000.0)


def moe_spec(cfg: dict, path: str, arch: str, need) -> ModelSpec:
    """Qwen3MoeForCausalLM / Glm4MoeForCausalLM. A setting foldserve does not serve (another
    activation, sparse steps, MLP-only layers, sliding windows, rope scaling, an o_proj bias)
    is refused naming the key."""
    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {key} = {cfg.get(key)!r}; {why} ({arch} as foldserve "
                               "serves it)")

    if cfg.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "the experts' activation must be silu")
    rp = cfg.get("rope_parameters") or {}
    rs = cfg.get("rope_scaling") or {}
    if rp.get("rope_type", "default") != "default" or rs.get("rope_type", rs.get("type", "default")) \
            not in ("default", None):
        refuse("rope_parameters" if rp else "rope_scaling", "only default RoPE is served")
    if cfg.get("use_sliding_window"):
        refuse("use_sliding_window", "sliding-window attention is not served")
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    hd = int(cfg.get("head_dim") or d // n_heads)
    if arch == "qwen3moe":
        if int(cfg.get("decoder_sparse_step", 1)) != 1:
            refuse("decoder_sparse_step", "every layer must be a MoE layer")
        if cfg.get("mlp_only_layers"):
            refuse("mlp_only_layers", "every layer must be a MoE layer")
        if cfg.get("attention_bias"):
            refuse("attention_bias", "Qwen3-MoE's attention has no biases")
        key = "num_local_experts" if "num_local_experts" in cfg else "num_experts"   # 5.x / 4.x
        n_experts, router, n_shared, first_dense = int(need(key)), "softmax", 0, 0
        qkv_bias, qk_norm, rot, scale, n_group, topk_group = False, True, hd, 1.0, 1, 1
    else:
        n_experts, router = int(need("n_routed_experts")), "sigmoid"
        n_shared = int(cfg.get("n_shared_experts") or 0)
        first_dense = int(cfg.get("first_k_dense_replace") or 0)
        qkv_bias, qk_norm = bool(cfg.get("attention_bias", False)), bool(cfg.get("use_qk_norm", False))
        factor = cfg.get("partial_rotary_factor", rp.get("partial_rotary_factor", 0.5))
        rot = int(hd * float(factor))
        scale = float(cfg.get("routed_scaling_factor", 1.0))
        n_group, topk_group = int(cfg.get("n_group") or 1), int(cfg.get("topk_group") or 1)
    eff = int(need("moe_intermediate_size"))
    return ModelSpec(
        arch=arch,
        n_layers=int(need("num_hidden_layers")),
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
        head_dim=hd,
        d_ff=int(cfg.get("intermediate_size") or 0),
        vocab=int(need("vocab_size")),
        rope_theta=rope_theta_of(cfg),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        qkv_bias=qkv_bias, qk_norm=qk_norm,
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=n_experts, n_experts_used=int(need("num_experts_per_tok")), expert_ff=eff,
        n_shared_experts=n_shared, shared_ff=eff * n_shared, first_dense_layers=first_dense,
        router=router, norm_topk_prob=bool(cfg.get("norm_topk_prob", False)),
        routed_scaling_factor=scale, n_group=n_group, topk_group=topk_group,
        rotary_dim=0 if rot == hd else rot,
        nextn_layers=int(cfg.get("num_nextn_predict_layers") or 0) if arch == "glm4moe" else 0)


def gptoss_spec(cfg: dict, path: str, need) -> ModelSpec:
    """GptOssForCausalLM. A setting foldserve does not serve is refused naming the key: a
    quantization_config (the HF MXFP4 `*_blocks` / `*_scales` tensors: serve the GGUF),
    layer_types other than sliding / full alternating from layer 0, another SwiGLU clamp or
    slope, attention without biases, rope other than yarn / default."""
    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {key} = {cfg.get(key)!r}; {why} (gpt-oss as foldserve "
                               "serves it)")
    if cfg.get("quantization_config"):
        refuse("quantization_config", "the HF MXFP4 tensors (*_blocks, *_scales) are not read; "
               "serve the model's GGUF (MXFP4 experts as stored) or a bf16 / float32 folder")
    n = int(need("num_hidden_layers"))
    W = int(cfg.get("sliding_window") or 0)
    want = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)]
    if cfg.get("layer_types") not in (None, want) or not W:
        refuse("layer_types", "layers 0, 2, 4, ... slide (sliding_window > 0), the others attend "
               "to the whole context")
    if float(cfg.get("swiglu_limit", 7.0)) != 7.0:
        refuse("swiglu_limit", "the experts' SwiGLU is clamped at 7")
    if float(cfg.get("swiglu_alpha", 1.702)) != 1.702:
        refuse("swiglu_alpha", "the experts' SwiGLU sigmoid slope is 1.702")
    if cfg.get("attention_bias", True) is not True:
        refuse("attention_bias", "q/k/v/o have biases")
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    kind = rp.get("rope_type", rp.get("type", "default"))
    yarn = None
    if kind == "yarn":
        yarn = (float(rp["factor"]), int(rp["original_max_position_embeddings"]),
                float(rp.get("beta_fast") or 32.0), float(rp.get("beta_slow") or 1.0),
                bool(rp.get("truncate", True)))
    elif kind != "default":
        refuse("rope_parameters", "rope is yarn or default")
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    return ModelSpec(
        arch="gptoss", n_layers=n, d_model=d, n_heads=n_heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads),
        head_dim=int(cfg.get("head_dim") or d // n_heads), d_ff=0,
        vocab=int(need("vocab_size")), rope_theta=rope_theta_of(cfg),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)), qkv_bias=True,
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=int(need("num_local_experts")), n_experts_used=int(need("num_experts_per_tok")),
        expert_ff=int(need("intermediate_size")), router="topk_softmax", sliding_window=W,
        attn_sinks=True, o_bias=True, rope_yarn=yarn)


def yarn_mscale(factor: float, mscale: float) -> float:
    """DeepSeek's YaRN attention factor: 0.1 * mscale * ln(factor) + 1 (1 at factor <= 1)."""
    import math
    return 1.0 if factor <= 1 else 0.1 * mscale * math.log(factor) + 1.0


def mla_spec(cfg: dict, path: str, need) -> ModelSpec:
    """DeepseekV3ForCausalLM / Glm4MoeLiteForCausalLM (multi-head latent attention, the
    DeepSeek-V3 router: sigmoid scores, a selection-only bias, group-limited top-k) and
    DeepseekV2ForCausalLM (the same attention; softmax scores, plain top-k, the weights times
    routed_scaling_factor and never renormalised, as transformers' DeepseekV2TopkRouter). A
    setting foldserve does not serve is refused naming the key."""
    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {key} = {cfg.get(key)!r}; {why} (deepseek2 as "
                               "foldserve serves it)")

    if cfg.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "the experts' activation must be silu")
    if cfg.get("attention_bias"):
        refuse("attention_bias", "latent attention without biases")
    if cfg.get("rope_interleave") is False:
        refuse("rope_interleave", "the checkpoint's interleaved RoPE dims are served")
    v2 = "DeepseekV2ForCausalLM" in (cfg.get("architectures") or []) or \
        (not cfg.get("architectures") and cfg.get("model_type") == "deepseek_v2")
    if v2:
        if cfg.get("scoring_func", "softmax") != "softmax":
            refuse("scoring_func", "DeepseekV2's router scores by softmax")
        if cfg.get("topk_method", "greedy") != "greedy" and int(cfg.get("n_group") or 1) != 1:
            refuse("topk_method", "DeepseekV2's group_limited_greedy (groups by their best "
                   "expert) is not served; greedy top-k, or one group")
    else:
        if cfg.get("scoring_func", "sigmoid") != "sigmoid":
            refuse("scoring_func", "DeepseekV3's router scores by sigmoid")
        if cfg.get("topk_method", "noaux_tc") != "noaux_tc":
            refuse("topk_method", "DeepseekV3's router chooses by noaux_tc")
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind not in ("default", None):
        refuse("rope_parameters" if cfg.get("rope_parameters") else "rope_scaling",
               "only default RoPE is served (YaRN's frequencies are not yet)")
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    nope, rope_d = int(need("qk_nope_head_dim")), int(need("qk_rope_head_dim"))
    n_layers = int(need("num_hidden_layers"))
    if "mlp_layer_types" in cfg and cfg["mlp_layer_types"] is not None:       # GLM-4.7-Flash
        types = list(cfg["mlp_layer_types"])
        first_dense = next((i for i, t in enumerate(types) if t != "dense"), len(types))
        if any(t != "sparse" for t in types[first_dense:]):
            refuse("mlp_layer_types", "dense layers must lead, sparse ones follow")
    else:
        first_dense = int(cfg.get("first_k_dense_replace") or 0)
    eff = int(need("moe_intermediate_size"))
    n_shared = int(cfg.get("n_shared_experts") or 0)
    return ModelSpec(
        arch="deepseek2", n_layers=n_layers, d_model=d, n_heads=n_heads, n_kv_heads=n_heads,
        head_dim=nope + rope_d, d_ff=int(cfg.get("intermediate_size") or 0),
        vocab=int(need("vocab_size")), rope_theta=rope_theta_of(cfg),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=int(need("n_routed_experts")), n_experts_used=int(need("num_experts_per_tok")),
        expert_ff=eff, n_shared_experts=n_shared, shared_ff=eff * n_shared,
        first_dense_layers=first_dense, router="softmax" if v2 else "sigmoid",
        norm_topk_prob=False if v2 else bool(cfg.get("norm_topk_prob", False)),
        routed_scaling_factor=float(cfg.get("routed_scaling_factor", 1.0)),
        # DeepseekV2's greedy top-k ignores the groups
        n_group=1 if v2 else int(cfg.get("n_group") or 1),
        topk_group=1 if v2 else int(cfg.get("topk_group") or 1),
        rotary_dim=rope_d, q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=int(need("kv_lora_rank")), qk_rope_head_dim=rope_d,
        v_head_dim=int(need("v_head_dim")),
        nextn_layers=int(cfg.get("num_nextn_predict_layers") or 0))


def next_spec(cfg: dict, path: str, need) -> ModelSpec:
    """Qwen3NextForCausalLM: Gated DeltaNet layers with a full gated-attention layer every
    `full_attention_interval` (layer_types), every layer's MLP the MoE with a sigmoid-gated
    shared expert. A setting foldserve does not serve is refused naming the key."""
    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {key} = {cfg.get(key)!r}; {why} (qwen3next as "
                               "foldserve serves it)")

    if cfg.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "the experts' and the conv's activation must be silu")
    if cfg.get("attention_bias"):
        refuse("attention_bias", "Qwen3-Next's attention has no biases")
    if int(cfg.get("decoder_sparse_step", 1)) != 1:
        refuse("decoder_sparse_step", "every layer must be a MoE layer")
    if cfg.get("mlp_only_layers"):
        refuse("mlp_only_layers", "every layer must be a MoE layer")
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if rp.get("rope_type", rp.get("type", "default")) not in ("default", None):
        refuse("rope_parameters", "only default RoPE is served")
    n_layers = int(need("num_hidden_layers"))
    types = cfg.get("layer_types")
    every = int(cfg.get("full_attention_interval") or 4)
    if types is not None:
        full = [i for i, t in enumerate(types) if t == "full_attention"]
        if len(types) != n_layers or any(t not in ("full_attention", "linear_attention")
                                         for t in types) or not full:
            refuse("layer_types", "linear_attention and full_attention layers, one a layer")
        every = full[0] + 1
        if full != list(range(every - 1, n_layers, every)):
            refuse("layer_types", "full attention every n-th layer (3 linear then 1 full)")
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    hd = int(cfg.get("head_dim") or d // n_heads)
    factor = float(rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25)))
    rot = int(hd * factor)
    sections = rp.get("mrope_section")        # Qwen3.5: interleaved MRoPE; a text token's
    if sections is not None and sum(sections) != rot // 2:   # positions are equal: plain RoPE
        refuse("rope_parameters", f"mrope_section {sections} must cover the {rot // 2} rotated "
               "pairs (text positions: the plain partial RoPE)")
    nk, nv = int(need("linear_num_key_heads")), int(need("linear_num_value_heads"))
    if nv % nk:
        refuse("linear_num_value_heads", f"a multiple of linear_num_key_heads ({nk})")
    sff = int(need("shared_expert_intermediate_size"))
    return ModelSpec(
        arch="qwen3next", n_layers=n_layers, d_model=d, n_heads=n_heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or n_heads), head_dim=hd, d_ff=0,
        vocab=int(need("vocab_size")), rope_theta=rope_theta_of(cfg),
        rms_eps=float(cfg.get("rms_norm_eps", 1e-6)),
        max_context=int(cfg.get("max_position_embeddings", 4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)), qk_norm=True,
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=int(need("num_experts")), n_experts_used=int(need("num_experts_per_tok")),
        expert_ff=int(need("moe_intermediate_size")), n_shared_experts=1 if sff else 0,
        shared_ff=sff, router="softmax", norm_topk_prob=bool(cfg.get("norm_topk_prob", True)),
        rotary_dim=0 if rot == hd else rot, full_attn_every=every, lin_k_heads=nk,
        lin_v_heads=nv, lin_k_dim=int(need("linear_key_head_dim")),
        lin_v_dim=int(need("linear_value_head_dim")),
        conv_kernel=int(cfg.get("linear_conv_kernel_dim", 4)), zero_centred_norms=True)


def kimi_spec(cfg: dict, path: str, need) -> ModelSpec:
    """KimiLinearForCausalLM: Kimi Delta Attention layers and NoPE latent-attention layers
    (`layer_types`, or Moonshot's `linear_attn_config` with 1-indexed `full_attn_layers` /
    `kda_layers`), leading dense MLPs (`mlp_layer_types` or `first_k_dense_replace`) then the
    DeepSeek-V3 MoE. Both spellings of the keys are read (transformers' saved config: e.g.
    `num_experts_per_token`, `moe_renormalize`; Moonshot's: `num_experts_per_tok`...). A
    setting foldserve does not serve is refused naming the key."""
    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {key} = {cfg.get(key)!r}; {why} (kimilinear as "
                               "foldserve serves it)")

    def first(*keys, default=None):
        for k in keys:
            if cfg.get(k) is not None:
                return cfg[k]
        if default is None:
            raise WeightsError(f"{path}: config.json has none of {', '.join(map(repr, keys))}")
        return default

    if cfg.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "the experts' and the short conv's activation must be silu")
    if cfg.get("attention_bias"):
        refuse("attention_bias", "latent attention without biases")
    lac = cfg.get("linear_attn_config") or {}
    if lac.get("safe_gate") or lac.get("gate_lower_bound") is not None:
        refuse("linear_attn_config", "Kimi-Linear's forget gate has no lower bound (the safe "
               "gate is GLM-5.3-Flash's)")
    n_layers = int(need("num_hidden_layers"))
    types = cfg.get("layer_types")
    if types is None and "full_attn_layers" in lac and "kda_layers" in lac:
        types = [None] * n_layers
        for i in lac["full_attn_layers"]:
            types[int(i) - 1] = "full_attention"
        for i in lac["kda_layers"]:
            types[int(i) - 1] = "linear_attention"
    if types is None:                               # transformers' default
        types = ["full_attention" if i and i % 4 == 0 else "linear_attention"
                 for i in range(n_layers)]
    if len(types) != n_layers or any(t not in ("full_attention", "linear_attention")
                                     for t in types):
        refuse("layer_types", "linear_attention and full_attention layers, one a layer")
    linear = tuple(i for i, t in enumerate(types) if t == "linear_attention")
    if len(linear) == n_layers:
        refuse("layer_types", "at least one full_attention layer")
    mlp_types = cfg.get("mlp_layer_types")
    if mlp_types is not None:
        first_dense = next((i for i, t in enumerate(mlp_types) if t != "dense"), len(mlp_types))
        if any(t != "sparse" for t in mlp_types[first_dense:]):
            refuse("mlp_layer_types", "dense layers must lead, sparse ones follow")
    else:
        first_dense = int(cfg.get("first_k_dense_replace", 1))
    H = int(first("linear_num_heads", default=lac.get("num_heads") or 32))
    D = int(first("linear_head_dim", default=lac.get("head_dim") or 128))
    K = int(first("linear_conv_kernel_dim", default=lac.get("short_conv_kernel_size") or 4))
    d = int(need("hidden_size"))
    n_heads = int(need("num_attention_heads"))
    nope, rope_d = int(need("qk_nope_head_dim")), int(need("qk_rope_head_dim"))
    eff = int(need("moe_intermediate_size"))
    n_shared = int(first("num_shared_experts", "n_shared_experts", default=1))
    return ModelSpec(
        arch="kimilinear", n_layers=n_layers, d_model=d, n_heads=n_heads, n_kv_heads=n_heads,
        head_dim=nope + rope_d, d_ff=int(cfg.get("intermediate_size") or 0),
        vocab=int(need("vocab_size")), rms_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        max_context=int(first("model_max_length", "max_position_embeddings", default=4096)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", False)),
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=int(first("num_experts", "num_local_experts", "n_routed_experts")),
        n_experts_used=int(first("num_experts_per_token", "num_experts_per_tok")),
        expert_ff=eff, n_shared_experts=n_shared, shared_ff=eff * n_shared,
        first_dense_layers=first_dense, router="sigmoid",
        norm_topk_prob=bool(first("moe_renormalize", "norm_topk_prob", default=True)),
        routed_scaling_factor=float(cfg.get("routed_scaling_factor", 1.0)),
        n_group=int(first("num_expert_group", "n_group", default=1)),
        topk_group=int(cfg.get("topk_group") or 1),
        rotary_dim=rope_d, q_lora_rank=int(cfg.get("q_lora_rank") or 0),
        kv_lora_rank=int(need("kv_lora_rank")), qk_rope_head_dim=rope_d,
        v_head_dim=int(need("v_head_dim")), lin_k_heads=H, lin_v_heads=H, lin_k_dim=D,
        lin_v_dim=D, conv_kernel=K, linear_layers=linear)


def glm5_spec(cfg: dict, path: str) -> ModelSpec:
    """Glm5NextForConditionalGeneration's text part (`text_config`, or the fields at the top
    level of a flat text-only config): KDA where layer_types says linear_attention, sparse
    NoPE latent attention (indexed_attention) with the pooled-key DSA indexer (indexer_types:
    "shared" layers keep no pooled keys), the DeepSeek-V3 MoE after the dense lead, mHC's
    streams. A setting foldserve does not serve is refused naming the key."""
    tc = cfg.get("text_config") or cfg

    def need(key):
        if tc.get(key) is None:
            raise WeightsError(f"{path}: text_config has no {key!r}")
        return tc[key]

    def refuse(key, why):
        raise UnsupportedModel(f"{path}: text_config.{key} = {tc.get(key)!r}; {why} (glm5next "
                               "as foldserve serves it)")

    if tc.get("hidden_act", "silu") != "silu":
        refuse("hidden_act", "silu only")
    if tc.get("attention_bias"):
        refuse("attention_bias", "latent attention without biases")
    if int(tc.get("qk_rope_head_dim") or 0):
        refuse("qk_rope_head_dim", "NoPE latent attention (0)")
    if not tc.get("index_kpool_always_select_tail", True):
        refuse("index_kpool_always_select_tail", "the tail pool is always selected")
    if int(tc.get("hc_sinkhorn_iters", 20)) != 20 or float(tc.get("hc_eps", 1e-6)) != 1e-6:
        refuse("hc_sinkhorn_iters", "mHC with 20 Sinkhorn iterations and eps 1e-6")
    if int(tc.get("n_group") or 1) != 1:
        refuse("n_group", "one expert group")
    n_layers = int(need("num_hidden_layers"))
    types = need("layer_types")
    if len(types) != n_layers or any(t not in ("linear_attention", "indexed_attention",
                                               "full_attention") for t in types):
        refuse("layer_types", "linear_attention and indexed_attention layers, one a layer")
    linear = tuple(i for i, t in enumerate(types) if t == "linear_attention")
    itypes = tc.get("indexer_types") or ["full"] * n_layers
    shared = tuple(i for i, t in enumerate(types) if t != "linear_attention"
                   and itypes[i] == "shared")
    full_seen = False
    for i, t in enumerate(types):
        if t == "linear_attention":
            continue
        if itypes[i] == "full":
            full_seen = True
        elif itypes[i] != "shared" or not full_seen:
            refuse("indexer_types", f"layer {i}: 'full', or 'shared' after a full layer")
    mlp_types = tc.get("mlp_layer_types") or (["dense"] * 3 + ["sparse"] * (n_layers - 3))
    first_dense = next((i for i, t in enumerate(mlp_types) if t != "dense"), len(mlp_types))
    if any(t != "sparse" for t in mlp_types[first_dense:]):
        refuse("mlp_layer_types", "dense layers must lead, sparse ones follow")
    H, D = int(tc.get("linear_num_heads", 64)), int(tc.get("linear_head_dim", 128))
    nope = int(need("qk_nope_head_dim"))
    eff = int(need("moe_intermediate_size"))
    n_shared = int(tc.get("n_shared_experts") or 1)
    lb = tc.get("linear_lower_bound", -5.0)
    return ModelSpec(
        arch="glm5next", n_layers=n_layers, d_model=int(need("hidden_size")),
        n_heads=int(need("num_attention_heads")), n_kv_heads=int(need("num_attention_heads")),
        head_dim=nope, d_ff=int(need("intermediate_size")), vocab=int(need("vocab_size")),
        rms_eps=float(tc.get("rms_norm_eps", 1e-5)),
        max_context=int(tc.get("max_position_embeddings", 1048576)),
        tie_embeddings=bool(cfg.get("tie_word_embeddings", tc.get("tie_word_embeddings", False))),
        name=str(cfg.get("_name_or_path", "")) or os.path.basename(os.path.dirname(path)),
        n_experts=int(need("n_routed_experts")), n_experts_used=int(need("num_experts_per_tok")),
        expert_ff=eff, n_shared_experts=n_shared, shared_ff=eff * n_shared,
        first_dense_layers=first_dense, router="sigmoid",
        norm_topk_prob=bool(tc.get("norm_topk_prob", True)),
        routed_scaling_factor=float(tc.get("routed_scaling_factor", 1.0)),
        q_lora_rank=int(need("q_lora_rank")), kv_lora_rank=int(need("kv_lora_rank")),
        qk_rope_head_dim=0, v_head_dim=int(need("v_head_dim")), lin_k_heads=H, lin_v_heads=H,
        lin_k_dim=D, lin_v_dim=D, conv_kernel=int(tc.get("linear_conv_kernel_dim", 4)),
        linear_layers=linear, lin_lower_bound=None if lb is None else float(lb),
        index_kpool=int(need("index_kpool")), index_topk=int(need("index_topk")),
        index_heads=int(need("index_n_heads")), index_head_dim=int(need("index_head_dim")),
        index_shared=shared, hc_mult=int(tc.get("hc_mult", 4)),
        swiglu_limit=float(tc.get("swiglu_limit") or 0.0))
