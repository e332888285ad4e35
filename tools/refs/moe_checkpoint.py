"""Tiny deterministic mixture-of-experts checkpoints, written without torch.

    python -m tools.refs.moe_checkpoint OUT_DIR [--family NAME ...] [--qtype F32 Q8_0] [--dequant-hf Q8_0]

writes, per family, `OUT_DIR/<family>/hf/` (a Hugging Face folder: config.json,
generation_config.json, model.safetensors, tokenizer.json, tokenizer_config.json,
chat_template.jinja), `OUT_DIR/<family>/<family>-F32.gguf` and `...-Q8_0.gguf`, and prints
each file's sha256.

Contracts:
- The weights are a pure function of the family's `MoeSpec` (its seed included): every
  tensor draws from its own PCG64 stream keyed by (seed, tensor name), through integer
  and correctly-rounded float64 arithmetic only (no transcendental functions), so the
  same spec gives the same bytes on every machine and numpy version (the bit generator's
  raw output and SeedSequence are stable by numpy's policy). Tests regenerate the files
  and compare sha256 with the records in tests/data/moe/.
- The HF folder is what transformers 5.25 `save_pretrained` writes for the class
  (`Qwen3MoeForCausalLM`, `Glm4MoeForCausalLM`, `DeepseekV3ForCausalLM`,
  `Glm4MoeLiteForCausalLM`, `DeepseekV2ForCausalLM`): the same config.json text, per-expert
  tensor names `model.layers.{i}.mlp.experts.{j}.{gate,up,down}_proj.weight`, float32.
  tools/refs/record_moe.py checks this by loading it in transformers and saving it again.
- The GGUF is what llama.cpp's `convert_hf_to_gguf.py` writes for that folder
  (`--outtype f32` / `q8_0`): its tensor names (3-D `blk.{i}.ffn_{gate,up,down}_exps.weight`
  in ggml order {n_embd, n_ff, n_expert} / {n_ff, n_embd, n_expert}), its per-tensor
  types (1-D, norms and `ffn_gate_inp` stay F32 in a Q8_0 file), its arch keys; the
  tokenizer keys are copied from the default model's GGUF (SmolLM2, 49,152 tokens), so the
  same token ids work in foldserve, transformers and llama.cpp. Where the converter itself
  differs, record_moe.py says so.
- The GGUF tensor data are the HF tensors unchanged (no family permutes q/k: qwen3moe and
  glm4moe rotate NeoX-style, GLM on the first `partial_rotary_factor` of each head,
  deepseek2 interleaved pairs on its rope dims), but for deepseek2's kv_b_proj, which the
  converter splits into attn_k_b [H, C, N] (transposed) and attn_v_b [H, V, C].
"""
from __future__ import annotations

import argparse
import functools
import hashlib
import json
import math
import re
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

TRANSFORMERS_VERSION = "5.25.0"   # the version whose save_pretrained output the HF folder matches
SQRT3 = math.sqrt(3.0)


@dataclass(frozen=True)
class MoeSpec:
    """The shape and the seed of one synthetic checkpoint."""
    name: str
    family: str                 # "qwen3moe" | "glm4moe" | "deepseek2" (the GGUF architecture)
    seed: int
    n_layer: int
    hidden: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_expert: int
    n_expert_used: int
    expert_ff: int              # moe_intermediate_size
    dense_ff: int               # intermediate_size (GLM's leading dense layers; Qwen: unused)
    vocab: int = 49152
    rope_theta: float = 10000.0
    rms_eps: float = 1e-6
    max_pos: int = 8192
    norm_topk_prob: bool = True
    # GLM (DeepSeek-V3 style router) only
    n_shared: int = 0
    first_dense: int = 0
    n_group: int = 1
    topk_group: int = 1
    routed_scaling: float = 1.0
    partial_rotary: float = 1.0
    attention_bias: bool = False
    qk_norm: bool = True
    # multi-head latent attention (deepseek2: DeepseekV3ForCausalLM) only; head_dim is then
    # qk_nope_head_dim + qk_rope_head_dim
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_nope_head_dim: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # the HF class written (deepseek2 only: "" is DeepseekV3ForCausalLM, or
    # "Glm4MoeLiteForCausalLM", or "DeepseekV2ForCausalLM": softmax router, no bias)
    hf_class: str = ""
    # standard deviations of the draws
    embed_std: float = 1.0
    head_std: float = 0.7       # lm_head: logits' spread ~ head_std * sqrt(hidden)
    norm_std: float = 0.1       # norm weights are 1 + norm_std * n
    bias_std: float = 0.1
    router_gain: float = 1.5
    score_bias_std: float = 0.1  # e_score_correction_bias
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = 2

    def __post_init__(self):
        assert self.family in ("qwen3moe", "glm4moe", "deepseek2"), self.family
        if self.family == "deepseek2":
            assert self.head_dim == self.qk_nope_head_dim + self.qk_rope_head_dim
        assert self.n_expert % self.n_group == 0
        assert self.n_expert_used <= (self.n_expert // self.n_group) * self.topk_group

    @property
    def softmax_router(self) -> bool:
        """Qwen3-MoE's and DeepSeek-V2's router (softmax, plain top-k, no selection bias);
        the others score by sigmoid with e_score_correction_bias."""
        return self.family == "qwen3moe" or self.hf_class == "DeepseekV2ForCausalLM"

    @property
    def rope_dim(self) -> int:
        return int(self.head_dim * self.partial_rotary)

    def is_moe_layer(self, i: int) -> bool:
        return i >= self.first_dense


FAMILIES: dict[str, MoeSpec] = {
    "qwen3moe-tiny": MoeSpec(
        name="qwen3moe-tiny", family="qwen3moe", seed=3101, n_layer=3, hidden=64,
        n_head=4, n_head_kv=2, head_dim=16, n_expert=8, n_expert_used=2, expert_ff=32,
        dense_ff=128, rms_eps=1e-6, qk_norm=True),
    "glm4moe-tiny": MoeSpec(
        name="glm4moe-tiny", family="glm4moe", seed=3102, n_layer=3, hidden=64,
        n_head=4, n_head_kv=2, head_dim=16, n_expert=16, n_expert_used=4, expert_ff=32,
        dense_ff=128, rms_eps=1e-5, n_shared=1, first_dense=1, n_group=4, topk_group=2,
        routed_scaling=2.5, partial_rotary=0.5, attention_bias=True, qk_norm=False),
    "deepseek3-tiny": MoeSpec(
        name="deepseek3-tiny", family="deepseek2", seed=3201, n_layer=3, hidden=64,
        n_head=4, n_head_kv=4, head_dim=24, n_expert=16, n_expert_used=4, expert_ff=32,
        dense_ff=128, rms_eps=1e-6, n_shared=1, first_dense=1, n_group=4, topk_group=2,
        routed_scaling=2.5, qk_norm=False, q_lora_rank=48, kv_lora_rank=32,
        qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16),
    # glm4moe-tiny's shape at widths of 256 (hidden, expert FF, attention output) and 512
    # (dense FF): every weight row a multiple of 256, so its Q4_K_M file holds real Q4_K and
    # Q6_K blocks (tools/refs/record_moe_q4km.py --family glm4moe-k256)
    "glm4moe-k256": MoeSpec(
        name="glm4moe-k256", family="glm4moe", seed=3103, n_layer=3, hidden=256,
        n_head=4, n_head_kv=2, head_dim=64, n_expert=16, n_expert_used=4, expert_ff=256,
        dense_ff=512, rms_eps=1e-5, n_shared=1, first_dense=1, n_group=4, topk_group=2,
        routed_scaling=2.5, partial_rotary=0.5, attention_bias=True, qk_norm=False),
    # qwen3moe-tiny's structure at widths of 256, 16 experts (llama-quantize's Q4_K_M gives a
    # model of exactly 8 experts Q8_0 attn_k / attn_v): Q4_K and Q6_K blocks, as glm4moe-k256
    "qwen3moe-k256": MoeSpec(
        name="qwen3moe-k256", family="qwen3moe", seed=3104, n_layer=3, hidden=256,
        n_head=4, n_head_kv=2, head_dim=64, n_expert=16, n_expert_used=4, expert_ff=256,
        dense_ff=512, rms_eps=1e-6, qk_norm=True),
    # GLM-4.7-Flash's proportions cut down (nope 192 / rope 64 / v 256, latent 512, q_lora 768,
    # 64 experts + 1 shared, top-4, one group, one leading dense layer, scaling 1.8,
    # rms_eps 1e-5, theta 1e6), 6 heads and expert / dense widths of 3 and 6 Q8_0 blocks so
    # that TP=2 and TP=3 split them
    "glm47flash-tiny": MoeSpec(
        name="glm47flash-tiny", family="deepseek2", seed=3202, n_layer=3, hidden=64,
        n_head=6, n_head_kv=6, head_dim=48, n_expert=16, n_expert_used=4, expert_ff=96,
        dense_ff=192, rope_theta=1000000.0, rms_eps=1e-5, n_shared=1, first_dense=1,
        n_group=1, topk_group=1, routed_scaling=1.8, qk_norm=False, q_lora_rank=32,
        kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        hf_class="Glm4MoeLiteForCausalLM"),
    # DeepSeek-V2-Lite's proportions cut down (no q_lora: a plain q; latent 512, nope 128 /
    # rope 64 / v 128; 64 experts top-6 + 2 shared, softmax router, plain top-k, weights
    # neither renormalised nor scaled; one leading dense layer); config.json without
    # scoring_func, so its GGUF has no expert_gating_func (llama.cpp's softmax rule). Its
    # depth, 27 layers, is V2-Lite's: llama.cpp 0c1e570 loads a deepseek2 file without
    # attention.q_lora_rank only at 26 or 27 blocks (src/models/deepseek2.cpp's is_lite)
    "deepseek2lite-tiny": MoeSpec(
        name="deepseek2lite-tiny", family="deepseek2", seed=3203, n_layer=27, hidden=64,
        n_head=4, n_head_kv=4, head_dim=48, n_expert=8, n_expert_used=2, expert_ff=96,
        dense_ff=192, rms_eps=1e-6, norm_topk_prob=False, n_shared=2, first_dense=1,
        n_group=1, topk_group=1, routed_scaling=1.0, qk_norm=False, q_lora_rank=0,
        kv_lora_rank=64, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32,
        hf_class="DeepseekV2ForCausalLM"),
}


# the families recorded by tools/refs/record_moe_kquant.py (a Q4_K_M file of real Q4_K / Q6_K
# blocks, its references only), not by record_moe.py (F32 and Q8_0 references)
K_QUANT_FAMILIES = ("glm4moe-k256", "qwen3moe-k256")


# ---------------------------------------------------------------- deterministic draws

def _stream(spec: MoeSpec, name: str) -> np.random.PCG64:
    return np.random.PCG64(np.random.SeedSequence([spec.seed, zlib.crc32(name.encode())]))


def normalish(spec: MoeSpec, name: str, shape: tuple[int, ...], std: float) -> np.ndarray:
    """float32 draws of mean 0 and standard deviation `std` (Irwin-Hall: 4 uniforms).

    Only exact or correctly rounded operations, so the bytes are the same everywhere."""
    n = int(np.prod(shape))
    raw = _stream(spec, name).random_raw(4 * n).reshape(4, n)
    u = (raw >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)
    s = ((u[0] + u[1]) + (u[2] + u[3])) - 2.0
    return (s * (SQRT3 * std)).astype(np.float32).reshape(shape)


# ---------------------------------------------------------------- HF names and weights

def hf_weights(spec: MoeSpec, *, shapes_only: bool = False) -> dict:
    """HF tensor name -> float32 array, the shapes transformers saves (out_features, in_features).

    shapes_only: name -> shape tuple instead, drawing nothing (for files too large to hold)."""
    H, D = spec.hidden, spec.head_dim
    q_out, kv_out = spec.n_head * D, spec.n_head_kv * D
    w: dict = {}

    def put(name, shape, std, offset=0.0):
        if shapes_only:
            w[name] = tuple(shape)
        elif offset:
            w[name] = (offset + normalish(spec, name, shape, std)).astype(np.float32)
        else:
            w[name] = normalish(spec, name, shape, std)

    def lin(name, out_f, in_f, gain=1.0):
        put(name, (out_f, in_f), gain / math.sqrt(in_f))

    def norm(name, n):
        put(name, (n,), spec.norm_std, 1.0)

    def bias(name, n, std):
        put(name, (n,), std)

    put("model.embed_tokens.weight", (spec.vocab, H), spec.embed_std)
    for i in range(spec.n_layer):
        p = f"model.layers.{i}."
        norm(p + "input_layernorm.weight", H)
        if spec.family == "deepseek2":
            _mla_weights(spec, p, lin, norm)
        else:
            _mha_weights(spec, p, lin, norm, bias, q_out, kv_out)
        norm(p + "post_attention_layernorm.weight", H)
        _mlp_weights(spec, i, p, lin, bias)
    norm("model.norm.weight", H)
    put("lm_head.weight", (spec.vocab, H), spec.head_std)
    return w


def _mla_weights(spec: MoeSpec, p: str, lin, norm) -> None:
    H, a = spec.hidden, p + "self_attn."
    C, R = spec.kv_lora_rank, spec.qk_rope_head_dim
    if spec.q_lora_rank:
        lin(a + "q_a_proj.weight", spec.q_lora_rank, H)
        norm(a + "q_a_layernorm.weight", spec.q_lora_rank)
        lin(a + "q_b_proj.weight", spec.n_head * spec.head_dim, spec.q_lora_rank)
    else:
        lin(a + "q_proj.weight", spec.n_head * spec.head_dim, H)
    lin(a + "kv_a_proj_with_mqa.weight", C + R, H)
    norm(a + "kv_a_layernorm.weight", C)
    lin(a + "kv_b_proj.weight", spec.n_head * (spec.qk_nope_head_dim + spec.v_head_dim), C)
    lin(a + "o_proj.weight", H, spec.n_head * spec.v_head_dim)


def _mha_weights(spec: MoeSpec, p: str, lin, norm, bias, q_out, kv_out) -> None:
    H, D = spec.hidden, spec.head_dim
    lin(p + "self_attn.q_proj.weight", q_out, H)
    lin(p + "self_attn.k_proj.weight", kv_out, H)
    lin(p + "self_attn.v_proj.weight", kv_out, H)
    if spec.attention_bias:
        bias(p + "self_attn.q_proj.bias", q_out, spec.bias_std)
        bias(p + "self_attn.k_proj.bias", kv_out, spec.bias_std)
        bias(p + "self_attn.v_proj.bias", kv_out, spec.bias_std)
    lin(p + "self_attn.o_proj.weight", H, q_out)
    if spec.qk_norm:
        norm(p + "self_attn.q_norm.weight", D)
        norm(p + "self_attn.k_norm.weight", D)


def _mlp_weights(spec: MoeSpec, i: int, p: str, lin, bias) -> None:
    H = spec.hidden
    if not spec.is_moe_layer(i):
        lin(p + "mlp.gate_proj.weight", spec.dense_ff, H)
        lin(p + "mlp.up_proj.weight", spec.dense_ff, H)
        lin(p + "mlp.down_proj.weight", H, spec.dense_ff)
        return
    lin(p + "mlp.gate.weight", spec.n_expert, H, spec.router_gain)
    if not spec.softmax_router:
        bias(p + "mlp.gate.e_score_correction_bias", spec.n_expert, spec.score_bias_std)
    for j in range(spec.n_expert):
        e = f"{p}mlp.experts.{j}."
        lin(e + "gate_proj.weight", spec.expert_ff, H)
        lin(e + "up_proj.weight", spec.expert_ff, H)
        lin(e + "down_proj.weight", H, spec.expert_ff)
    if spec.n_shared:
        sff = spec.expert_ff * spec.n_shared
        lin(p + "mlp.shared_experts.gate_proj.weight", sff, H)
        lin(p + "mlp.shared_experts.up_proj.weight", sff, H)
        lin(p + "mlp.shared_experts.down_proj.weight", H, sff)


def hf_config(spec: MoeSpec) -> dict:
    """config.json as transformers 5.25 writes it for the class (every key it writes)."""
    common = {
        "attention_bias": spec.attention_bias,
        "attention_dropout": 0.0,
        "bos_token_id": spec.bos_id,
        "dtype": "float32",
        "eos_token_id": spec.eos_id,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden,
        "initializer_range": 0.02,
        "intermediate_size": spec.dense_ff,
        "max_position_embeddings": spec.max_pos,
        "moe_intermediate_size": spec.expert_ff,
        "norm_topk_prob": spec.norm_topk_prob,
        "num_attention_heads": spec.n_head,
        "num_experts_per_tok": spec.n_expert_used,
        "num_hidden_layers": spec.n_layer,
        "num_key_value_heads": spec.n_head_kv,
        "output_router_logits": False,
        "pad_token_id": spec.pad_id,
        "rms_norm_eps": spec.rms_eps,
        "tie_word_embeddings": False,
        "transformers_version": TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": spec.vocab,
    }
    if spec.family == "deepseek2":
        if spec.hf_class == "Glm4MoeLiteForCausalLM":
            return _glm4_moe_lite_config(spec, common)
        if spec.hf_class == "DeepseekV2ForCausalLM":
            return _deepseek2_config(spec, common)
        assert not spec.hf_class, spec.hf_class
        return _deepseek3_config(spec, common)
    if spec.family == "qwen3moe":
        assert spec.first_dense == 0 and spec.n_shared == 0 and spec.n_group == 1
        assert spec.partial_rotary == 1.0 and spec.qk_norm
        cfg = {**common,
               "architectures": ["Qwen3MoeForCausalLM"],
               "decoder_sparse_step": 1,
               "mlp_only_layers": [],
               "model_type": "qwen3_moe",
               "num_local_experts": spec.n_expert,
               "rope_parameters": {"rope_theta": spec.rope_theta, "rope_type": "default"},
               "router_aux_loss_coef": 0.001,
               "sliding_window": None,
               "use_sliding_window": False}
    else:
        cfg = {**common,
               "architectures": ["Glm4MoeForCausalLM"],
               "first_k_dense_replace": spec.first_dense,
               "model_type": "glm4_moe",
               "n_group": spec.n_group,
               "n_routed_experts": spec.n_expert,
               "n_shared_experts": spec.n_shared,
               "num_nextn_predict_layers": 0,
               "rope_parameters": {"partial_rotary_factor": spec.partial_rotary,
                                   "rope_theta": spec.rope_theta, "rope_type": "default"},
               "routed_scaling_factor": spec.routed_scaling,
               "topk_group": spec.topk_group,
               "use_qk_norm": spec.qk_norm}
    return cfg


def _deepseek3_config(spec: MoeSpec, common: dict) -> dict:
    """DeepseekV3ForCausalLM's config.json (with scoring_func / topk_method, which
    llama.cpp's converter reads for the gating function)."""
    assert not spec.attention_bias and not spec.qk_norm and spec.n_head_kv == spec.n_head
    cfg = {k: v for k, v in common.items() if k != "head_dim"}
    cfg.update({
        "architectures": ["DeepseekV3ForCausalLM"],
        "first_k_dense_replace": spec.first_dense,
        "head_dim": spec.qk_rope_head_dim,
        "kv_lora_rank": spec.kv_lora_rank,
        "model_type": "deepseek_v3",
        "n_group": spec.n_group,
        "n_routed_experts": spec.n_expert,
        "n_shared_experts": spec.n_shared,
        "num_nextn_predict_layers": 0,
        "pretraining_tp": 1,
        "q_lora_rank": spec.q_lora_rank or None,
        "qk_head_dim": spec.head_dim,
        "qk_nope_head_dim": spec.qk_nope_head_dim,
        "qk_rope_head_dim": spec.qk_rope_head_dim,
        "rope_interleave": True,
        "rope_parameters": {"rope_theta": spec.rope_theta, "rope_type": "default"},
        "routed_scaling_factor": spec.routed_scaling,
        "scoring_func": "sigmoid",
        "topk_group": spec.topk_group,
        "topk_method": "noaux_tc",
        "v_head_dim": spec.v_head_dim,
    })
    return cfg


def _deepseek2_config(spec: MoeSpec, common: dict) -> dict:
    """DeepseekV2ForCausalLM's config.json (topk_method greedy, no scoring_func: the class
    scores by softmax and never renormalises)."""
    assert not spec.attention_bias and not spec.qk_norm and spec.n_head_kv == spec.n_head
    assert spec.n_group == 1 and not spec.norm_topk_prob
    cfg = {k: v for k, v in common.items() if k != "head_dim"}
    cfg.update({
        "architectures": ["DeepseekV2ForCausalLM"],
        "first_k_dense_replace": spec.first_dense,
        "head_dim": spec.qk_rope_head_dim,
        "kv_lora_rank": spec.kv_lora_rank,
        "mlp_bias": False,
        "model_type": "deepseek_v2",
        "n_group": spec.n_group,
        "n_routed_experts": spec.n_expert,
        "n_shared_experts": spec.n_shared,
        "pretraining_tp": 1,
        "q_lora_rank": spec.q_lora_rank or None,
        "qk_head_dim": spec.head_dim,
        "qk_nope_head_dim": spec.qk_nope_head_dim,
        "qk_rope_head_dim": spec.qk_rope_head_dim,
        "rope_parameters": {"rope_theta": spec.rope_theta, "rope_type": "default"},
        "routed_scaling_factor": spec.routed_scaling,
        "topk_group": spec.topk_group,
        "topk_method": "greedy",
        "v_head_dim": spec.v_head_dim,
    })
    return cfg


def _glm4_moe_lite_config(spec: MoeSpec, common: dict) -> dict:
    """Glm4MoeLiteForCausalLM's config.json. Its class knows `mlp_layer_types`, not
    `first_k_dense_replace`, and has no `scoring_func` (its router is always sigmoid);
    GLM-4.7-Flash's own config.json carries first_k_dense_replace (transformers keeps such
    extra keys), which llama.cpp's converter reads for leading_dense_block_count. The tiny
    checkpoint also carries "scoring_func": "sigmoid": without it the converter writes no
    expert_gating_func and llama.cpp gates a deepseek2 file by softmax unless it has
    GLM-4.7-Flash's 47/48 blocks and 154,880-token vocabulary (src/models/deepseek2.cpp)."""
    assert not spec.attention_bias and not spec.qk_norm and spec.n_head_kv == spec.n_head
    cfg = {k: v for k, v in common.items() if k != "head_dim"}
    cfg.update({
        "architectures": ["Glm4MoeLiteForCausalLM"],
        "first_k_dense_replace": spec.first_dense,
        "kv_lora_rank": spec.kv_lora_rank,
        "mlp_layer_types": ["dense" if i < spec.first_dense else "sparse" for i in range(spec.n_layer)],
        "model_type": "glm4_moe_lite",
        "n_group": spec.n_group,
        "n_routed_experts": spec.n_expert,
        "n_shared_experts": spec.n_shared,
        "num_nextn_predict_layers": 0,
        "pretraining_tp": 1,
        "q_lora_rank": spec.q_lora_rank or None,
        "qk_head_dim": spec.head_dim,
        "qk_nope_head_dim": spec.qk_nope_head_dim,
        "qk_rope_head_dim": spec.qk_rope_head_dim,
        "rope_interleave": True,
        "rope_parameters": {"rope_theta": spec.rope_theta, "rope_type": "default"},
        "routed_scaling_factor": spec.routed_scaling,
        "scoring_func": "sigmoid",
        "topk_group": spec.topk_group,
        "v_head_dim": spec.v_head_dim,
    })
    return cfg


def generation_config(spec: MoeSpec) -> dict:
    return {"_from_model_config": True, "bos_token_id": spec.bos_id, "eos_token_id": spec.eos_id,
            "output_attentions": False, "output_hidden_states": False,
            "pad_token_id": spec.pad_id, "transformers_version": TRANSFORMERS_VERSION,
            "use_cache": True}


def _json_text(d: dict) -> str:
    # transformers: json.dumps(indent=2, sort_keys=True) + "\n"
    return json.dumps(d, indent=2, sort_keys=True) + "\n"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- the default tokenizer

def default_gguf() -> str:
    from server.engine import locate
    return locate.default_gguf()


def _write_tokenizer(out: Path, src_gguf: str) -> None:
    """tokenizer.json / tokenizer_config.json / chat_template.jinja equal in behaviour to
    the default model's (SmolLM2): built from its GGUF by foldserve's own tokenizer."""
    from server.text.gguf_meta import read_metadata
    from server.text.tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(src_gguf)
    meta = read_metadata(src_gguf, prefixes=("tokenizer.",))
    tokens = meta["tokenizer.ggml.tokens"]
    (out / "tokenizer.json").write_text(tok.hf.to_str(pretty=True) + "\n", encoding="utf-8")
    cfg = {
        "add_bos_token": bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        "bos_token": tokens[meta["tokenizer.ggml.bos_token_id"]],
        "clean_up_tokenization_spaces": False,
        "eos_token": tokens[meta["tokenizer.ggml.eos_token_id"]],
        "model_max_length": 8192,
        "pad_token": tokens[meta["tokenizer.ggml.padding_token_id"]],
        "tokenizer_class": "GPT2Tokenizer",
        "unk_token": tokens[meta["tokenizer.ggml.unknown_token_id"]],
    }
    (out / "tokenizer_config.json").write_text(_json_text(cfg), encoding="utf-8")
    (out / "chat_template.jinja").write_text(meta["tokenizer.chat_template"], encoding="utf-8")


def write_hf(spec: MoeSpec, out_dir: str | Path, weights: dict[str, np.ndarray] | None = None,
             *, tokenizer_gguf: str | None = None) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    from safetensors.numpy import save_file
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = hf_weights(spec) if weights is None else weights
    (out / "config.json").write_text(_json_text(hf_config(spec)), encoding="utf-8")
    (out / "generation_config.json").write_text(_json_text(generation_config(spec)), encoding="utf-8")
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(w.items())},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    _write_tokenizer(out, tokenizer_gguf or default_gguf())
    return {p.name: sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}


# ---------------------------------------------------------------- GGUF names and keys

def gguf_layout(spec: MoeSpec) -> list[tuple[str, tuple[str, ...]]]:
    """(GGUF name, its HF names) in the converter's order of writing. One HF name is the
    same array; several (the experts 0..n-1) are stacked on a new first axis, so numpy
    shape (n_expert, n_ff, n_embd) is ggml's ne {n_embd, n_ff, n_expert}."""
    out: list[tuple[str, tuple[str, ...]]] = [("token_embd.weight", ("model.embed_tokens.weight",))]
    for i in range(spec.n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."

        def one(g, h):
            out.append((b + g, (p + h,)))
        one("attn_norm.weight", "input_layernorm.weight")
        if spec.family == "deepseek2":
            _mla_layout(spec, p, b, out)
            one("ffn_norm.weight", "post_attention_layernorm.weight")
            _mlp_layout(spec, i, p, b, out)
            continue
        for x in "qkv":
            one(f"attn_{x}.weight", f"self_attn.{x}_proj.weight")
            if spec.attention_bias:
                one(f"attn_{x}.bias", f"self_attn.{x}_proj.bias")
        one("attn_output.weight", "self_attn.o_proj.weight")
        if spec.qk_norm:
            one("attn_q_norm.weight", "self_attn.q_norm.weight")
            one("attn_k_norm.weight", "self_attn.k_norm.weight")
        post = "post_attention_norm.weight" if spec.family == "glm4moe" else "ffn_norm.weight"
        one(post, "post_attention_layernorm.weight")
        _mlp_layout(spec, i, p, b, out)
    out.append(("output_norm.weight", ("model.norm.weight",)))
    out.append(("output.weight", ("lm_head.weight",)))
    return out


def _mlp_layout(spec: MoeSpec, i: int, p: str, b: str, out: list) -> None:
    def one(g, h):
        out.append((b + g, (p + h,)))
    if not spec.is_moe_layer(i):
        for x in ("gate", "up", "down"):
            one(f"ffn_{x}.weight", f"mlp.{x}_proj.weight")
        return
    one("ffn_gate_inp.weight", "mlp.gate.weight")
    if not spec.softmax_router:
        one("exp_probs_b.bias", "mlp.gate.e_score_correction_bias")
    for x in ("down", "gate", "up"):
        out.append((f"{b}ffn_{x}_exps.weight",
                    tuple(f"{p}mlp.experts.{j}.{x}_proj.weight" for j in range(spec.n_expert))))
    if spec.n_shared:
        for x in ("gate", "up", "down"):
            one(f"ffn_{x}_shexp.weight", f"mlp.shared_experts.{x}_proj.weight")


# the converter splits kv_b_proj [H (N + V), C] into attn_k_b [H, C, N] (k rows, transposed)
# and attn_v_b [H, V, C]; these HF "names" mark the two halves (gguf_tensors makes them)
KV_B_K, KV_B_V = "#k_b", "#v_b"


def _mla_layout(spec: MoeSpec, p: str, b: str, out: list) -> None:
    a = p + "self_attn."

    def one(g, h):
        out.append((b + g, (a + h,)))
    if spec.q_lora_rank:
        one("attn_q_a.weight", "q_a_proj.weight")
        one("attn_q_a_norm.weight", "q_a_layernorm.weight")
        one("attn_q_b.weight", "q_b_proj.weight")
    else:
        one("attn_q.weight", "q_proj.weight")
    one("attn_kv_a_mqa.weight", "kv_a_proj_with_mqa.weight")
    one("attn_kv_a_norm.weight", "kv_a_layernorm.weight")
    out.append((b + "attn_k_b.weight", (a + "kv_b_proj.weight", KV_B_K)))
    out.append((b + "attn_v_b.weight", (a + "kv_b_proj.weight", KV_B_V)))
    one("attn_output.weight", "o_proj.weight")


def _kv_b_half(spec: MoeSpec, kv_b: np.ndarray, half: str) -> np.ndarray:
    N, V = spec.qk_nope_head_dim, spec.v_head_dim
    x = kv_b.reshape(spec.n_head, N + V, kv_b.shape[1])
    return np.ascontiguousarray(x[:, :N].transpose(0, 2, 1) if half == KV_B_K else x[:, N:])


def _kv_b_join(spec: MoeSpec, k_b: np.ndarray, v_b: np.ndarray) -> np.ndarray:
    """attn_k_b [H, C, N] and attn_v_b [H, V, C] back to kv_b_proj [H (N + V), C]."""
    x = np.concatenate([k_b.transpose(0, 2, 1), v_b], axis=1)
    return np.ascontiguousarray(x.reshape(-1, x.shape[2]))


def gguf_tensors(spec: MoeSpec, w: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array in numpy order) for the HF weights `w`."""
    def array(hs):
        if len(hs) == 2 and hs[1] in (KV_B_K, KV_B_V):
            return _kv_b_half(spec, w[hs[0]], hs[1])
        return w[hs[0]] if len(hs) == 1 else np.stack([w[h] for h in hs])
    return [(g, array(hs)) for g, hs in gguf_layout(spec)]


def gguf_type(name: str, arr, qtype: str, n_layer: int | None = None) -> str:
    """The type convert_hf_to_gguf.py gives a tensor (an array or its shape) for --outtype f32 /
    q8_0; for "Q4_K_M" the type llama-quantize's Q4_K_M gives it (n_layer needed), see
    q4_k_m_type."""
    shape = tuple(getattr(arr, "shape", arr))
    if qtype == "F32" or len(shape) <= 1 or name.endswith("_norm.weight") \
            or ".ffn_gate_inp." in name or not name.endswith(".weight"):
        return "F32"
    if qtype == "Q4_K_M":
        return q4_k_m_type(name, shape, n_layer)
    assert qtype == "Q8_0", qtype
    return "Q8_0" if shape[-1] % 32 == 0 else "F16"


def _more_bits(i: int, n: int) -> bool:
    """llama-quantize's use_more_bits(i_layer, n_layers) (src/llama-quant.cpp)."""
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def q4_k_m_type(name: str, shape: tuple, n_layer: int) -> str:
    """llama-quantize's Q4_K_M choice for a weight of a model of other than 8 experts
    (src/llama-quant.cpp): output Q6_K; attn_v and ffn_down (also _exps, _shexp) Q6_K in the
    layers use_more_bits picks, else Q4_K; then its fallback for rows not a multiple of 256:
    Q4_K -> Q5_0, Q6_K -> Q8_0 (gguf-py quantizes those; Q4_K and Q6_K are quantized by
    tools/refs/kquants_numpy.py, a port of ggml's reference quantizers). Checked tensor by
    tensor against llama-quantize on the F32 file (tools/refs/record_moe_q4km.py records the
    comparison)."""
    m = re.match(r"blk\.(\d+)\.", name)
    six = name == "output.weight" or (m is not None and _more_bits(int(m.group(1)), n_layer) and (
        ".attn_v." in name or ".ffn_down." in name or ".ffn_down_exps." in name
        or ".ffn_down_shexp." in name))
    if shape[-1] % 256 == 0:
        return "Q6_K" if six else "Q4_K"
    return "Q8_0" if six else "Q5_0"


def quantize(arr: np.ndarray, t: str) -> np.ndarray:
    """The GGUF bytes of `arr` as type `t` (gguf-py's quantizers; Q4_K / Q6_K: kquants_numpy)."""
    import gguf
    if t in ("Q4_K", "Q6_K"):
        from tools.refs import kquants_numpy as kq
        return kq.quantize_q4_k(arr) if t == "Q4_K" else kq.quantize_q6_k(arr)
    return gguf.quants.quantize(arr, gguf.GGMLQuantizationType[t])


def _add_arch_keys(wr, spec: MoeSpec) -> None:
    import gguf
    wr.add_block_count(spec.n_layer)
    wr.add_context_length(spec.max_pos)
    wr.add_embedding_length(spec.hidden)
    wr.add_feed_forward_length(spec.dense_ff)
    wr.add_head_count(spec.n_head)
    wr.add_head_count_kv(1 if spec.family == "deepseek2" else spec.n_head_kv)
    wr.add_rope_freq_base(spec.rope_theta)
    wr.add_layer_norm_rms_eps(spec.rms_eps)
    wr.add_expert_count(spec.n_expert)
    wr.add_expert_used_count(spec.n_expert_used)
    if spec.family == "glm4moe":
        wr.add_expert_group_count(spec.n_group)
        wr.add_expert_group_used_count(spec.topk_group)
    if spec.family == "deepseek2":
        _add_mla_keys(wr, spec)
        return
    wr.add_key_length(spec.head_dim)
    wr.add_value_length(spec.head_dim)
    if spec.family == "qwen3moe":
        wr.add_expert_feed_forward_length(spec.expert_ff)
    else:
        wr.add_rope_dimension_count(spec.rope_dim)
        wr.add_expert_feed_forward_length(spec.expert_ff)
        wr.add_expert_shared_count(spec.n_shared)
        wr.add_leading_dense_block_count(spec.first_dense)
        wr.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        wr.add_expert_weights_scale(spec.routed_scaling)
        wr.add_expert_weights_norm(spec.norm_topk_prob)
        wr.add_nextn_predict_layers(0)


def _add_mla_keys(wr, spec: MoeSpec) -> None:
    """deepseek2's keys as llama.cpp's converter writes them (head_count_kv 1: MLA as MQA
    over the latent; key_length = latent + rope dims, value_length = latent)."""
    import gguf
    wr.add_expert_group_count(spec.n_group)
    wr.add_expert_group_used_count(spec.topk_group)
    if not spec.softmax_router:          # DeepSeek-V2's config has no scoring_func: no key
        wr.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    wr.add_key_length(spec.kv_lora_rank + spec.qk_rope_head_dim)
    wr.add_value_length(spec.kv_lora_rank)
    wr.add_leading_dense_block_count(spec.first_dense)
    wr.add_vocab_size(spec.vocab)
    if spec.q_lora_rank:
        wr.add_q_lora_rank(spec.q_lora_rank)
    wr.add_kv_lora_rank(spec.kv_lora_rank)
    wr.add_key_length_mla(spec.head_dim)
    wr.add_value_length_mla(spec.v_head_dim)
    wr.add_expert_feed_forward_length(spec.expert_ff)
    wr.add_expert_shared_count(spec.n_shared)
    wr.add_expert_weights_scale(spec.routed_scaling)
    if spec.norm_topk_prob:
        wr.add_expert_weights_norm(True)
    wr.add_rope_dimension_count(spec.qk_rope_head_dim)


@functools.lru_cache(maxsize=4)
def _tokenizer_kv(src_gguf: str) -> tuple:
    """((key, value, type, sub_type), ...) of the source GGUF's tokenizer.* keys."""
    import gguf
    r = gguf.GGUFReader(src_gguf)
    out = []
    for key, f in r.fields.items():
        if key.startswith("tokenizer."):
            t = f.types[0]
            sub = f.types[-1] if t == gguf.GGUFValueType.ARRAY else None
            out.append((key, f.contents(), t, sub))
    return tuple(out)


def _copy_tokenizer_keys(wr, src_gguf: str) -> None:
    for key, v, t, sub in _tokenizer_kv(src_gguf):
        if sub is None:
            wr.add_key_value(key, v, t)
        else:
            wr.add_key_value(key, v, t, sub_type=sub)


def write_gguf(spec: MoeSpec, path: str | Path, qtype: str = "F32",
               weights: dict[str, np.ndarray] | None = None, *,
               tokenizer_gguf: str | None = None) -> str:
    """Write the GGUF (qtype "F32" or "Q8_0"); returns its sha256."""
    import gguf
    w = hf_weights(spec) if weights is None else weights
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    wr = gguf.GGUFWriter(str(path), spec.family)
    wr.add_type(gguf.GGUFType.MODEL)
    wr.add_name(spec.name)
    _add_arch_keys(wr, spec)
    wr.add_file_type({"F32": gguf.LlamaFileType.ALL_F32, "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
                      "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M}[qtype])
    _copy_tokenizer_keys(wr, tokenizer_gguf or default_gguf())
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr in gguf_tensors(spec, w):
        t = gguf_type(name, arr, qtype, spec.n_layer)
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if t == "F32":
            wr.add_tensor(name, arr)
        else:
            wr.add_tensor(name, quantize(arr, t), raw_dtype=gguf.GGMLQuantizationType[t])
    wr.add_size_label(gguf.size_label(*wr.get_total_parameter_count()))
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return sha256_file(path)


def dequantized_weights(spec: MoeSpec, qtype: str,
                        weights: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """The HF weights as the `qtype` GGUF holds them (quantized, then dequantized to float32):
    what transformers runs to be a reference for that GGUF."""
    import gguf
    w = hf_weights(spec) if weights is None else weights
    back = dict(w)
    halves: dict = {}
    for (g, hs), (_, arr) in zip(gguf_layout(spec), gguf_tensors(spec, w)):
        t = gguf_type(g, arr, qtype, spec.n_layer)
        if t != "F32":
            qt = gguf.GGMLQuantizationType[t]
            arr = gguf.quants.dequantize(quantize(arr, t), qt).reshape(arr.shape)
        if len(hs) == 2 and hs[1] in (KV_B_K, KV_B_V):
            halves.setdefault(hs[0], {})[hs[1]] = arr
            if len(halves[hs[0]]) == 2:
                back[hs[0]] = _kv_b_join(spec, halves[hs[0]][KV_B_K], halves[hs[0]][KV_B_V])
            continue
        if t == "F32":
            continue
        deq = arr
        if len(hs) == 1:
            back[hs[0]] = deq
        else:
            for j, h in enumerate(hs):
                back[h] = deq[j]
    return {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in back.items()}


# ---------------------------------------------------------------- all files of a family

@dataclass
class Built:
    spec: MoeSpec
    root: Path
    hf_dir: Path
    gguf: dict[str, Path] = field(default_factory=dict)       # qtype -> path
    dequant_hf: dict[str, Path] = field(default_factory=dict)  # qtype -> HF folder of its weights
    sha256: dict[str, str] = field(default_factory=dict)      # relative path -> sha256


def build(name: str, out_dir: str | Path, qtypes=("F32", "Q8_0"), *, hf: bool = True,
          dequant_hf=(), tokenizer_gguf: str | None = None) -> Built:
    """Write one family's files under out_dir/<name>/: hf/, <name>-<qtype>.gguf, and for each
    qtype in `dequant_hf` an HF folder hf-<qtype>-dequant/ holding that GGUF's weights."""
    spec = FAMILIES[name]
    root = Path(out_dir) / name
    w = hf_weights(spec)
    b = Built(spec=spec, root=root, hf_dir=root / "hf")
    if hf:
        for f, h in write_hf(spec, b.hf_dir, w, tokenizer_gguf=tokenizer_gguf).items():
            b.sha256[f"hf/{f}"] = h
    for qt in qtypes:
        p = root / f"{name}-{qt}.gguf"
        b.gguf[qt] = p
        b.sha256[p.name] = write_gguf(spec, p, qt, w, tokenizer_gguf=tokenizer_gguf)
    for qt in dequant_hf:
        d = root / f"hf-{qt}-dequant"
        b.dequant_hf[qt] = d
        for f, h in write_hf(spec, d, dequantized_weights(spec, qt, w),
                             tokenizer_gguf=tokenizer_gguf).items():
            b.sha256[f"{d.name}/{f}"] = h
    return b


_BUILT: dict[tuple, Built] = {}


def build_once(name: str, qtypes=("F32", "Q8_0"), *, hf: bool = True) -> Built:
    """build() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once per (name, qtypes, hf): for tests.
    The files are regenerated, never committed; compare Built.sha256 with the record."""
    from tools.refs import scratch
    key = (name, tuple(qtypes), hf)
    if key not in _BUILT:
        _BUILT[key] = build(name, scratch.folder(f"foldserve-{name}-"), qtypes, hf=hf)
    return _BUILT[key]


MLA_FIELDS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def spec_dict(spec: MoeSpec) -> dict:
    """The spec as recorded (the MLA fields only for a deepseek2 spec, hf_class only where
    set: the older records predate them)."""
    d = asdict(spec)
    if spec.family != "deepseek2":
        for k in MLA_FIELDS:
            d.pop(k)
    if not spec.hf_class:
        d.pop("hf_class")
    return d


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--family", nargs="+", default=list(FAMILIES), choices=list(FAMILIES))
    ap.add_argument("--qtype", nargs="+", default=["F32", "Q8_0"], choices=["F32", "Q8_0", "Q4_K_M"])
    ap.add_argument("--dequant-hf", nargs="*", default=[], choices=["Q8_0", "Q4_K_M"],
                    help="also write hf-<qtype>-dequant/: the HF folder of that GGUF's weights")
    a = ap.parse_args(argv)
    for name in a.family:
        b = build(name, a.out_dir, a.qtype, dequant_hf=a.dequant_hf)
        for rel, h in b.sha256.items():
            print(f"{h}  {b.root / rel}")


if __name__ == "__main__":
    main()
