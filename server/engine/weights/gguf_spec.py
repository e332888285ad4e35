"""GGUF metadata -> ModelSpec."""
from __future__ import annotations

import numpy as np

from dataclasses import replace

from server.shapes.spec import MOE_ARCHS, ModelSpec, UnsupportedModel, check_arch
from .loaded import WeightsError

# the {arch}.* keys a mixture-of-experts GGUF may carry (llama.cpp's converter and
# src/llama-model.cpp); any other {arch}.* key is refused by name
MOE_KEYS = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "rope.freq_base",
    "rope.dimension_count", "vocab_size", "expert_count", "expert_used_count",
    "expert_feed_forward_length", "expert_shared_count", "leading_dense_block_count",
    "expert_gating_func", "expert_weights_scale", "expert_weights_norm",
    "expert_group_count", "expert_group_used_count", "nextn_predict_layers",
    "rope.scaling.type", "rope.scaling.factor", "rope.scaling.original_context_length",
}
MLA_KEYS = MOE_KEYS | {"attention.q_lora_rank", "attention.kv_lora_rank",
                       "attention.key_length_mla", "attention.value_length_mla"}
# kimi-linear (llama.cpp's src/models/kimi-linear.cpp): MLA's keys, the KDA layers' conv
# kernel and head dim; head_count_kv is an array, 0 on a KDA layer
KIMI_KEYS = MLA_KEYS | {"ssm.conv_kernel", "kda.head_dim"}
# glm5-next (llama.cpp's src/models/glm5-next.cpp): kimi-linear's keys, the safe gate, the
# SwiGLU clamp, the pooled-key DSA indexer and mHC
GLM5_KEYS = KIMI_KEYS | {
    "kda.gate_lower_bound", "swiglu_clamp_exp", "swiglu_clamp_shexp",
    "attention.indexer.head_count", "attention.indexer.key_length", "attention.indexer.top_k",
    "attention.indexer.types", "attention.indexer.kpool", "attention.indexer.kpool_select_tail",
    "hyper_connection.count", "hyper_connection.sinkhorn_iterations", "hyper_connection.epsilon"}
# the {arch}.* keys a gpt-oss GGUF carries (llama.cpp's converter, conversion/gpt_oss.py)
GPTOSS_KEYS = {
    "context_length", "embedding_length", "block_count", "feed_forward_length",
    "attention.head_count", "attention.head_count_kv", "attention.key_length",
    "attention.value_length", "attention.layer_norm_rms_epsilon", "attention.sliding_window",
    "rope.freq_base", "rope.scaling.type", "rope.scaling.factor",
    "rope.scaling.original_context_length", "rope.scaling.yarn_beta_fast",
    "rope.scaling.yarn_beta_slow", "vocab_size", "expert_count", "expert_used_count",
    "expert_feed_forward_length",
}
GATING = {1: "softmax", 2: "sigmoid"}     # llama.cpp's LLAMA_EXPERT_GATING_FUNC_TYPE


class Fields:
    """Typed reads of a GGUFReader's fields, naming the file and key on error."""

    def __init__(self, reader, path: str):
        self.fields, self.path = reader.fields, path

    def get(self, key: str, default=None):
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def need(self, key: str):
        f = self.fields.get(key)
        if f is None:
            raise WeightsError(f"{self.path}: GGUF metadata has no {key!r}; is this a complete model file?")
        return f.contents()

    def count(self, key: str) -> int | None:
        f = self.fields.get(key)
        return None if f is None else len(f.data)


def f32(x) -> float:
    """A float32 field as the decimal it was written from (9.99999974e-06 -> 1e-05)."""
    return float(str(np.float32(x)))


def spec_from_gguf(meta: Fields, names: set[str]) -> tuple[ModelSpec, str]:
    """(spec, the raw architecture string that prefixes the metadata keys)."""
    raw = str(meta.need("general.architecture"))
    arch = check_arch(raw)
    a = raw
    d = int(meta.need(f"{a}.embedding_length"))
    n_heads = int(meta.need(f"{a}.attention.head_count"))
    n_kv = meta.get(f"{a}.attention.head_count_kv", n_heads)
    recur = arch in ("kimilinear", "glm5next")
    linear = kimi_linear_layers(meta, a, n_kv) if recur else ()
    n_kv = n_heads if recur else int(n_kv)
    if arch in ("deepseek2", "kimilinear", "glm5next"):   # MLA: the q/k head is key_length_mla (nope + rope)
        head_dim = meta.need(f"{a}.attention.key_length_mla")
        n_kv = n_heads
    elif arch in MOE_ARCHS:      # rope.dimension_count may be partial there (GLM: half a head)
        head_dim = meta.get(f"{a}.attention.key_length") or d // n_heads
    else:
        head_dim = meta.get(f"{a}.attention.key_length") or meta.get(f"{a}.rope.dimension_count") \
            or d // n_heads
    vocab = meta.count("tokenizer.ggml.tokens") or meta.get(f"{a}.vocab_size")
    if not vocab:
        raise WeightsError(f"{meta.path}: no tokenizer.ggml.tokens and no {a}.vocab_size to size the vocabulary")
    spec = ModelSpec(
        arch=arch,
        n_layers=int(meta.need(f"{a}.block_count")),
        d_model=d,
        n_heads=n_heads,
        n_kv_heads=n_kv,
        head_dim=int(head_dim),
        d_ff=int(meta.get(f"{a}.feed_forward_length", 0) if arch in MOE_ARCHS
                 else meta.need(f"{a}.feed_forward_length")),
        vocab=int(vocab),
        rope_theta=f32(meta.get(f"{a}.rope.freq_base", 10000.0)),
        rms_eps=f32(meta.get(f"{a}.attention.layer_norm_rms_epsilon", 1e-5)),
        max_context=int(meta.get(f"{a}.context_length", 4096)),
        tie_embeddings="output.weight" not in names,
        qkv_bias="blk.0.attn_q.bias" in names,
        qk_norm="blk.0.attn_q_norm.weight" in names,
        name=str(meta.get("general.name", "")),
    )
    if arch == "gptoss":
        return gptoss_spec(meta, spec, a), a
    if arch == "qwen3next":                  # Gated DeltaNet hybrid: server/engine/weights/gguf_qwen3next.py
        from .gguf_qwen3next import next_spec
        return next_spec(meta, spec, a, MOE_KEYS), a
    kind = meta.get(f"{a}.rope.scaling.type")
    if kind not in (None, "none", "llama3"):
        raise WeightsError(f"{meta.path}: rope scaling {kind!r} is not supported "
                           "(foldserve supports Llama 3.1 style scaling only)")
    if arch in MOE_ARCHS:
        spec = moe_spec(meta, spec, a)
    if recur:                       # llama.cpp: the KDA layers have head_count heads of kda.head_dim
        D = int(meta.need(f"{a}.kda.head_dim"))
        spec = replace(spec, linear_layers=tuple(i for i in linear if i < spec.n_layers),
                       lin_k_heads=n_heads, lin_v_heads=n_heads,
                       lin_k_dim=D, lin_v_dim=D, conv_kernel=int(meta.need(f"{a}.ssm.conv_kernel")))
    if arch == "glm5next":
        spec = glm5_fields(meta, spec, a)
    return spec, a


def glm5_fields(meta: Fields, spec: ModelSpec, a: str) -> ModelSpec:
    """glm5-next's indexer, mHC, safe gate and SwiGLU clamp, as llama.cpp reads them; a value
    foldserve does not serve is refused naming the key."""
    path = meta.path

    def refuse(key, why):
        raise UnsupportedModel(f"{path}: {a}.{key} = {meta.get(f'{a}.{key}')!r}; {why} "
                               "(glm5-next as foldserve serves it)")
    if int(meta.need(f"{a}.hyper_connection.count")) != 4:
        refuse("hyper_connection.count", "4 mHC streams")
    if int(meta.need(f"{a}.hyper_connection.sinkhorn_iterations")) != 20:
        refuse("hyper_connection.sinkhorn_iterations", "20 Sinkhorn iterations")
    if f32(meta.need(f"{a}.hyper_connection.epsilon")) != 1e-6:
        refuse("hyper_connection.epsilon", "eps 1e-6")
    if meta.get(f"{a}.attention.indexer.kpool_select_tail", False) is not True:
        refuse("attention.indexer.kpool_select_tail", "the tail pool always selected (true)")
    types = meta.get(f"{a}.attention.indexer.types")
    shared = ()
    if types is not None:
        types = list(types) if isinstance(types, (list, tuple)) else [types] * spec.n_layers
        shared = tuple(i for i in range(spec.n_layers)
                       if not spec.is_linear_layer(i) and not int(types[i]))
    clamp = meta.get(f"{a}.swiglu_clamp_exp", 0.0)
    clamps = set(clamp if isinstance(clamp, (list, tuple)) else [clamp]) - {0, 0.0}
    shexp = meta.get(f"{a}.swiglu_clamp_shexp")
    if len(clamps) > 1 or (shexp is not None and
                           set(shexp if isinstance(shexp, (list, tuple)) else [shexp]) - {0, 0.0}
                           != clamps):
        refuse("swiglu_clamp_exp", "one clamp for every expert and the shared expert")
    lb = meta.get(f"{a}.kda.gate_lower_bound")
    return replace(
        spec, index_kpool=int(meta.need(f"{a}.attention.indexer.kpool")),
        index_topk=int(meta.need(f"{a}.attention.indexer.top_k")),
        index_heads=int(meta.need(f"{a}.attention.indexer.head_count")),
        index_head_dim=int(meta.need(f"{a}.attention.indexer.key_length")),
        index_shared=shared, hc_mult=4, lin_lower_bound=None if lb is None else f32(lb),
        swiglu_limit=f32(clamps.pop()) if clamps else 0.0)


def kimi_linear_layers(meta: Fields, a: str, kv) -> tuple:
    """kimi-linear's KDA layers: those whose attention.head_count_kv entry is 0 (an array a
    layer, as llama.cpp's converter writes it)."""
    n = int(meta.need(f"{a}.block_count"))
    if not isinstance(kv, (list, tuple)) or len(kv) != n:
        raise WeightsError(f"{meta.path}: {a}.attention.head_count_kv is {kv!r}; kimi-linear "
                           f"names each of its {n} layers (0: a KDA layer)")
    linear = tuple(i for i, k in enumerate(kv) if int(k) == 0)
    if len(linear) == n:
        raise UnsupportedModel(f"{meta.path}: {a}.attention.head_count_kv is 0 on every layer; "
                               "at least one latent-attention layer is served")
    return linear


def deepseek2_default_gating(block_count: int, vocab: int) -> int:
    """llama.cpp's rule (src/models/deepseek2.cpp at 0c1e570) for a deepseek2 file without
    {arch}.expert_gating_func: GLM-4.7-Flash's shape (47 or 48 blocks, the NextN block
    counted, and a 154,880-token vocabulary) gates by sigmoid (2), any other file by softmax
    (1), as DeepSeek-V2 / V2.5 files written before the key existed do."""
    return 2 if block_count in (47, 48) and vocab == 154880 else 1


def moe_spec(meta: Fields, spec: ModelSpec, a: str) -> ModelSpec:
    """The mixture-of-experts fields of a qwen3moe / glm4moe GGUF, as llama.cpp reads them.
    An unknown {arch}.* key, or a value foldserve does not serve, is refused by name."""
    path, arch = meta.path, spec.arch
    keys = (GLM5_KEYS if arch == "glm5next" else KIMI_KEYS if arch == "kimilinear"
            else MLA_KEYS if arch == "deepseek2" else MOE_KEYS)
    unknown = sorted(k for k in meta.fields if k.startswith(a + ".") and k[len(a) + 1:] not in keys)
    if unknown:
        raise UnsupportedModel(
            f"{path}: GGUF key(s) {', '.join(unknown)} are not part of the {arch} family as "
            f"foldserve serves it (known {a}.* keys: {', '.join(sorted(keys))})")

    def need_int(key):
        return int(meta.need(f"{a}.{key}"))

    block_count = need_int("block_count")
    nextn = int(meta.get(f"{a}.nextn_predict_layers", 0))
    if not 0 <= nextn < block_count:
        raise WeightsError(f"{path}: {a}.nextn_predict_layers {nextn} with block_count {block_count}")
    gating = meta.get(f"{a}.expert_gating_func")
    if arch == "qwen3moe":
        # llama.cpp runs qwen3moe with softmax gating and renormalised weights, whatever the keys
        router, norm = "softmax", True
        if gating not in (None, 1):
            raise UnsupportedModel(f"{path}: {a}.expert_gating_func {gating} (qwen3moe gates by "
                                   "softmax, 1)")
        if meta.get(f"{a}.expert_weights_norm") is False:
            raise UnsupportedModel(f"{path}: {a}.expert_weights_norm false (qwen3moe renormalises "
                                   "its top-k weights)")
        if meta.get(f"{a}.expert_shared_count"):
            raise UnsupportedModel(f"{path}: {a}.expert_shared_count (qwen3moe has no shared expert)")
    elif arch in ("kimilinear", "glm5next"):
        if gating != 2:
            raise UnsupportedModel(f"{path}: {a}.expert_gating_func {gating}; kimi-linear gates "
                                   "by sigmoid (2), the key required as llama.cpp reads it")
        router, norm = "sigmoid", bool(meta.get(f"{a}.expert_weights_norm", False))
    elif arch == "deepseek2":
        router = GATING.get(gating if gating not in (None, 0)
                            else deepseek2_default_gating(block_count, spec.vocab))
        if router is None:
            raise UnsupportedModel(f"{path}: {a}.expert_gating_func {gating}; foldserve serves "
                                   "softmax (1) and sigmoid (2) gating")
        norm = bool(meta.get(f"{a}.expert_weights_norm", False))
    else:
        router = GATING.get(2 if gating in (None, 0) else gating)
        if router is None:
            raise UnsupportedModel(f"{path}: {a}.expert_gating_func {gating}; foldserve serves "
                                   "softmax (1) and sigmoid (2) gating")
        norm = bool(meta.get(f"{a}.expert_weights_norm", False))
    scale = f32(meta.get(f"{a}.expert_weights_scale", 0.0)) or 1.0
    n_shared = int(meta.get(f"{a}.expert_shared_count", 0))
    eff = need_int("expert_feed_forward_length")
    first_dense = int(meta.get(f"{a}.leading_dense_block_count", 0))
    rot = int(meta.get(f"{a}.rope.dimension_count", 0) or (0 if arch == "glm5next" else spec.head_dim))
    n_group = int(meta.get(f"{a}.expert_group_count", 0) or 1)
    topk_group = int(meta.get(f"{a}.expert_group_used_count", 0) or 1)
    if first_dense and not spec.d_ff:
        raise WeightsError(f"{path}: {a}.leading_dense_block_count {first_dense} without "
                           f"{a}.feed_forward_length")
    mla = {}
    if arch in ("deepseek2", "kimilinear", "glm5next"):
        kv_lora = need_int("attention.kv_lora_rank")
        if int(meta.need(f"{a}.attention.key_length")) != kv_lora + rot:
            raise WeightsError(f"{path}: {a}.attention.key_length is not kv_lora_rank + "
                               "rope.dimension_count (MLA stored as MQA over the latent)")
        mla = dict(q_lora_rank=int(meta.get(f"{a}.attention.q_lora_rank", 0) or 0),
                   kv_lora_rank=kv_lora, qk_rope_head_dim=rot,
                   v_head_dim=need_int("attention.value_length_mla"))
    return replace(
        spec, **mla, n_layers=block_count - nextn, nextn_layers=nextn,
        n_experts=need_int("expert_count"), n_experts_used=need_int("expert_used_count"),
        expert_ff=eff, n_shared_experts=n_shared, shared_ff=eff * n_shared,
        first_dense_layers=first_dense, router=router, norm_topk_prob=norm,
        routed_scaling_factor=scale, n_group=n_group, topk_group=topk_group,
        rotary_dim=(rot if arch in ("deepseek2", "kimilinear", "glm5next")
                    else 0 if rot == spec.head_dim else rot))


def gptoss_spec(meta: Fields, spec: ModelSpec, a: str) -> ModelSpec:
    """A gpt-oss GGUF's fields, as llama.cpp reads them (layers 0, 2, ... slide, the top-k
    logits softmaxed, YaRN). The file does not say YaRN's `truncate`: the model's own config
    (false: the correction range unrounded) is taken, where llama.cpp rounds it. An unknown
    {arch}.* key, or another rope scaling, is refused by name."""
    path = meta.path
    unknown = sorted(k for k in meta.fields if k.startswith(a + ".") and k[len(a) + 1:] not in GPTOSS_KEYS)
    if unknown:
        raise UnsupportedModel(
            f"{path}: GGUF key(s) {', '.join(unknown)} are not part of the gpt-oss family as "
            f"foldserve serves it (known {a}.* keys: {', '.join(sorted(GPTOSS_KEYS))})")
    kind = meta.get(f"{a}.rope.scaling.type")
    yarn = None
    if kind == "yarn":
        yarn = (f32(meta.need(f"{a}.rope.scaling.factor")),
                int(meta.need(f"{a}.rope.scaling.original_context_length")),
                f32(meta.get(f"{a}.rope.scaling.yarn_beta_fast", 32.0)),
                f32(meta.get(f"{a}.rope.scaling.yarn_beta_slow", 1.0)), False)
    elif kind not in (None, "none"):
        raise UnsupportedModel(f"{path}: {a}.rope.scaling.type {kind!r}; gpt-oss is served with "
                               "yarn (or none)")
    return replace(
        spec, d_ff=0, n_experts=int(meta.need(f"{a}.expert_count")),
        n_experts_used=int(meta.need(f"{a}.expert_used_count")),
        expert_ff=int(meta.need(f"{a}.expert_feed_forward_length")), router="topk_softmax",
        sliding_window=int(meta.need(f"{a}.attention.sliding_window")),
        attn_sinks=True, o_bias=True, rope_yarn=yarn)
