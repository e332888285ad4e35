"""Tiny mixture-of-experts checkpoints written from a dummy shape's seeded tensors: a GGUF
under llama.cpp's tensor names and keys (F32 or Q8_0 matrices, the experts as 3-D tensors,
optionally a tokenizer and an MTP block), and a Hugging Face folder (float32 safetensors).
For the loaders' and the engine's tests; the independent references (transformers,
llama.cpp) are tools/refs' business."""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import gguf
import numpy as np

from server.engine.weights.dummy import dummy_tensor
from server.engine.weights.names import stored_names
from server.families import family

GLOBAL = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight"}


def spec_with_vocab(spec, vocab: int):
    return replace(spec, vocab=vocab)


def gguf_names(spec) -> dict:
    """HF suffix -> GGUF suffix, for this arch (the norm after attention is per arch)."""
    table = {hf: g for g, hf in family(spec).GGUF_LAYER.items()}
    table["post_attention_layernorm.weight"] = ("post_attention_norm.weight" if spec.arch == "glm4moe"
                                                else "ffn_norm.weight")
    return table


def write_gguf(path: Path, spec, kind: str = "F32", seed: int = 0, tokenizer=None, mtp: bool = False,
               extra: dict | None = None) -> Path:
    """kind: the matrices' GGML type (F32 or Q8_0; norms, biases and the router stay F32).
    tokenizer: a tokenizers.Tokenizer (byte-level BPE) written as the file's vocabulary.
    mtp: a GLM file's NextN block blk.{n_layers} and the key saying so: of a spec with
    mtp_layers (server/families/nextn.py) the whole block, the dummy's tensors under llama.cpp's
    names (its decoder layer as blk.{n_layers}.*, its own as blk.{n_layers}.nextn.*); else
    three random tensors of it (a block that is counted, never run)."""
    a = spec.arch
    w = gguf.GGUFWriter(str(path), a)
    w.add_name(spec.name)
    w.add_context_length(spec.max_context)
    w.add_embedding_length(spec.d_model)
    w.add_block_count(spec.n_layers + (1 if mtp else 0))
    if spec.d_ff:
        w.add_feed_forward_length(spec.d_ff)
    w.add_head_count(spec.n_heads)
    w.add_head_count_kv(spec.n_kv_heads)
    w.add_key_length(spec.head_dim)
    w.add_value_length(spec.head_dim)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    w.add_expert_count(spec.n_experts)
    w.add_expert_used_count(spec.n_experts_used)
    w.add_expert_feed_forward_length(spec.expert_ff)
    w.add_rope_dimension_count(spec.rot)
    if a == "glm4moe":
        w.add_expert_shared_count(spec.n_shared_experts)
        w.add_leading_dense_block_count(spec.first_dense_layers)
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        w.add_expert_weights_scale(spec.routed_scaling_factor)
        w.add_expert_weights_norm(spec.norm_topk_prob)
        if spec.n_group > 1:
            w.add_uint32(f"{a}.expert_group_count", spec.n_group)
            w.add_uint32(f"{a}.expert_group_used_count", spec.topk_group)
        if mtp:
            w.add_uint32(f"{a}.nextn_predict_layers", 1)
    for key, value in (extra or {}).items():
        w.add_uint32(key, value)
    if tokenizer is not None:
        state = json.loads(tokenizer.to_str())["model"]
        tokens = [t for t, _ in sorted(state["vocab"].items(), key=lambda kv: kv[1])]
        assert len(tokens) == spec.vocab, (len(tokens), spec.vocab)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("llama-bpe")
        w.add_token_list(tokens)
        w.add_token_types([3 if t.startswith("<") and t.endswith(">") else 1 for t in tokens])
        w.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in state["merges"]])
        w.add_bos_token_id(0)
        w.add_eos_token_id(1)
        w.add_add_bos_token(False)
        w.add_chat_template("{% for m in messages %}<s>{{ m['role'] }}: {{ m['content'] }}\n"
                            "{% endfor %}{% if add_generation_prompt %}<s>assistant: {% endif %}")
    else:
        w.add_vocab_size(spec.vocab)
    names = gguf_names(spec)
    qtype = gguf.GGMLQuantizationType[kind]

    def put(name, x):
        if x.ndim >= 2 and kind != "F32" and not name.endswith("ffn_gate_inp.weight"):
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, np.ascontiguousarray(x, dtype=np.float32))

    experts: dict = {}
    from server.families import nextn
    own = {hf: f"blk.{spec.n_layers}.{g}" for g, hf0 in nextn.GGUF_NEXTN.items()
           for hf in (f"model.layers.{spec.n_layers}.{hf0}",)}
    for n in stored_names(spec):
        x = dummy_tensor(spec, n, seed)
        if n in GLOBAL:
            put(GLOBAL[n], x)
            continue
        if n in own:                               # the NextN block's own tensors
            put(own[n], x)
            continue
        parts = n.split(".")                       # model.layers.I.rest
        i, rest = int(parts[2]), ".".join(parts[3:])
        if rest.startswith("mlp.experts."):
            e, proj = int(parts[5]), parts[6]
            experts.setdefault((i, proj), {})[e] = x
            continue
        put(f"blk.{i}.{names[rest]}", x)
    for (i, proj), xs in sorted(experts.items()):
        stacked = np.stack([xs[e] for e in range(spec.n_experts)])      # [E, out, in]
        put(f"blk.{i}.ffn_{proj.removesuffix('_proj')}_exps.weight", stacked)
    if mtp and not spec.mtp_layers:                # a NextN block: not run, counted
        rng = np.random.default_rng(7)
        d = spec.d_model
        for nm, shape in ((f"blk.{spec.n_layers}.nextn.eh_proj.weight", (d, 2 * d)),
                          (f"blk.{spec.n_layers}.nextn.enorm.weight", (d,)),
                          (f"blk.{spec.n_layers}.attn_norm.weight", (d,))):
            put(nm, rng.standard_normal(shape).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def write_hf(folder: Path, spec, seed: int = 0, fused_experts: bool = False) -> Path:
    """config.json (transformers' keys for the class) + model.safetensors, float32.
    fused_experts: transformers 5's mlp.experts.gate_up_proj / down_proj 3-D parameters."""
    from safetensors.numpy import save_file
    folder.mkdir(parents=True, exist_ok=True)
    cfg = {"vocab_size": spec.vocab, "hidden_size": spec.d_model, "intermediate_size": spec.d_ff,
           "num_hidden_layers": spec.n_layers, "num_attention_heads": spec.n_heads,
           "num_key_value_heads": spec.n_kv_heads, "head_dim": spec.head_dim,
           "hidden_act": "silu", "max_position_embeddings": spec.max_context,
           "rms_norm_eps": spec.rms_eps, "rope_theta": spec.rope_theta,
           "tie_word_embeddings": spec.tie_embeddings, "num_experts_per_tok": spec.n_experts_used,
           "moe_intermediate_size": spec.expert_ff, "norm_topk_prob": spec.norm_topk_prob}
    if spec.arch == "qwen3moe":
        cfg.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                   num_experts=spec.n_experts, decoder_sparse_step=1, mlp_only_layers=[],
                   attention_bias=False)
    else:
        cfg.update(architectures=["Glm4MoeForCausalLM"], model_type="glm4_moe",
                   n_routed_experts=spec.n_experts, n_shared_experts=spec.n_shared_experts,
                   first_k_dense_replace=spec.first_dense_layers,
                   routed_scaling_factor=spec.routed_scaling_factor, n_group=spec.n_group,
                   topk_group=spec.topk_group, partial_rotary_factor=spec.rot / spec.head_dim,
                   attention_bias=spec.qkv_bias, use_qk_norm=spec.qk_norm)
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = {n: dummy_tensor(spec, n, seed) for n in stored_names(spec)}
    if fused_experts:
        for i in range(spec.n_layers):
            p = f"model.layers.{i}.mlp.experts."
            if p + "0.gate_proj.weight" not in tensors:
                continue
            gu = [np.concatenate([tensors.pop(f"{p}{e}.gate_proj.weight"),
                                  tensors.pop(f"{p}{e}.up_proj.weight")]) for e in range(spec.n_experts)]
            tensors[p + "gate_up_proj"] = np.stack(gu)
            tensors[p + "down_proj"] = np.stack([tensors.pop(f"{p}{e}.down_proj.weight")
                                                 for e in range(spec.n_experts)])
    save_file(tensors, str(folder / "model.safetensors"))
    return folder
