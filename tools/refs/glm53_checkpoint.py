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
import importlib.util
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("tiny_hf", Path(__file__).with_name("tiny_hf.py"))
th = importlib.util.module_from_spec(_spec)     # by its path: tools/refs/tiny_hf.py says why
_spec.loader.exec_module(th)
nc = th.sibling("next_checkpoint")              # its tokenizer: the same 512 ids
kc = th.sibling("kimi_checkpoint")              # Kimi-Linear's KDA layers

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


def weights() -> dict[str, np.ndarray]:
    """The text part's tensors by the names transformers saves (model.language_model.*)."""
    c = TEXT
    d, V, H = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    C, N, Vd, QL = c["kv_lora_rank"], c["qk_nope_head_dim"], c["v_head_dim"], c["q_lora_rank"]
    LH = c["linear_num_heads"]
    E, eff, ff = c["n_routed_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    Hi, Di, kp, hc = c["index_n_heads"], c["index_head_dim"], c["index_kpool"], c["hc_mult"]
    w: dict[str, np.ndarray] = {}
    P = "model.language_model."
    put, lin, mlp = th.makers(NAME, w, d)
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
            w[p + f"{part}_scale"] = th.rng(NAME, p + f"{part}_scale").uniform(0.5, 1.5, 3).astype(np.float32)
        a = p + "self_attn."
        if kind == "linear_attention":
            kc.kda_weights(NAME, w, a, c, (LH,))
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


def write(out_dir) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    return th.write_folder(out_dir, CONFIG, weights(), nc.write_tokenizer)


_BUILT: dict = {}


def build_once() -> tuple[Path, dict]:
    """write() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once: for tests."""
    return th.build_once(_BUILT, NAME, write)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="The tiny GLM-5.3-Flash checkpoint")
    ap.add_argument("out_dir")
    out = Path(ap.parse_args().out_dir)
    for f, h in write(out / "hf").items():
        print(h, f"hf/{f}")


# ------------------------------------------------------------------ the GGUF
def gguf_tensors(w: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """The text part under llama.cpp's `glm5-next` names and layouts (src/models/glm5-next.cpp,
    llama-arch.cpp): kimi-linear's KDA forms (convs (1, d_inner, 1, K), ssm_a = -exp(A_log)),
    deepseek2's kv_b split into attn_k_b [H, C, N] (transposed) and attn_v_b [H, V, C], the
    mHC tensors blk.N.hc_{attn,ffn}_{fn,base,scale}, the indexer's, experts stacked."""
    c = TEXT
    H, N, Vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"]
    P = "model.language_model."
    out = [("token_embd.weight", w[P + "embed_tokens.weight"]),
           ("output_norm.weight", w[P + "norm.weight"]), ("output.weight", w["lm_head.weight"])]
    for i, kind in enumerate(c["layer_types"]):
        p, b = P + f"layers.{i}.", f"blk.{i}."
        a, m = p + "self_attn.", p + "mlp."
        out.append((b + "attn_norm.weight", w[p + "input_layernorm.weight"]))
        for part in ("hc_attn", "hc_ffn"):
            for x in ("fn", "base", "scale"):
                out.append((b + f"{part}_{x}.weight", w[p + f"{part}_{x}"]))
        if kind == "linear_attention":
            out += kc.kda_gguf(w, a, b)
        else:
            kv_b = w[a + "kv_b_proj.weight"].reshape(H, N + Vd, -1)
            out += [(b + "attn_q_a.weight", w[a + "q_a_proj.weight"]),
                    (b + "attn_q_a_norm.weight", w[a + "q_a_layernorm.weight"]),
                    (b + "attn_q_b.weight", w[a + "q_b_proj.weight"]),
                    (b + "attn_kv_a_mqa.weight", w[a + "kv_a_proj_with_mqa.weight"]),
                    (b + "attn_kv_a_norm.weight", w[a + "kv_a_layernorm.weight"]),
                    (b + "attn_k_b.weight", np.ascontiguousarray(kv_b[:, :N].transpose(0, 2, 1))),
                    (b + "attn_v_b.weight", np.ascontiguousarray(kv_b[:, N:])),
                    (b + "attn_output.weight", w[a + "o_proj.weight"])]
            if c["indexer_types"][i] == "full":
                x = a + "indexer."
                out += [(b + "indexer.k_norm.weight", w[x + "k_norm.weight"]),
                        (b + "indexer.k_norm.bias", w[x + "k_norm.bias"]),
                        (b + "indexer.proj.weight", w[x + "weights_proj.weight"]),
                        (b + "indexer.attn_k.weight", w[x + "wk.weight"]),
                        (b + "indexer.attn_q_b.weight", w[x + "wq_b.weight"]),
                        (b + "indexer_compressor_gate.weight", w[x + "index_kpool_compress_gate"]),
                        (b + "indexer_compressor_ape.weight", w[x + "index_kpool_compress_ape"])]
        out.append((b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]))
        if c["mlp_layer_types"][i] == "dense":
            out += [(b + f"ffn_{x}.weight", w[m + f"{x}_proj.weight"]) for x in ("gate", "up", "down")]
            continue
        out += [(b + "ffn_gate_inp.weight", w[m + "gate.weight"]),
                (b + "exp_probs_b.bias", w[m + "gate.e_score_correction_bias"])]
        for x in ("gate", "up", "down"):
            out.append((b + f"ffn_{x}_exps.weight", np.stack(
                [w[m + f"experts.{e}.{x}_proj.weight"] for e in range(c["n_routed_experts"])])))
        out += [(b + f"ffn_{x}_shexp.weight", w[m + f"shared_experts.{x}_proj.weight"])
                for x in ("gate", "up", "down")]
    return out


def write_gguf(folder, path) -> str:
    """The F32 GGUF `glm5-next` of the folder's text part, written with the gguf package under
    llama.cpp's names and keys (its converter at this commit stops on the folder transformers
    saves: no `linear_attn_config`); returns its sha256. No MTP block (the HF folder has none)."""
    import gguf
    c, A = TEXT, "glm5-next"
    folder, path = Path(folder), Path(path)
    wr = gguf.GGUFWriter(str(path), A)
    kc.gguf_kda_keys(wr, c, NAME, c["max_position_embeddings"])
    wr.add_float32(f"{A}.kda.gate_lower_bound", c["linear_lower_bound"])
    wr.add_q_lora_rank(c["q_lora_rank"])
    wr.add_kv_lora_rank(c["kv_lora_rank"])
    wr.add_rope_dimension_count(0)
    wr.add_key_length(c["kv_lora_rank"])
    wr.add_value_length(c["kv_lora_rank"])
    wr.add_key_length_mla(c["qk_nope_head_dim"])
    wr.add_value_length_mla(c["v_head_dim"])
    wr.add_expert_count(c["n_routed_experts"])
    wr.add_expert_used_count(c["num_experts_per_tok"])
    wr.add_expert_feed_forward_length(c["moe_intermediate_size"])
    wr.add_expert_shared_count(c["n_shared_experts"])
    wr.add_leading_dense_block_count(c["mlp_layer_types"].count("dense"))
    wr.add_expert_weights_scale(c["routed_scaling_factor"])
    wr.add_expert_weights_norm(c["norm_topk_prob"])
    wr.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    wr.add_float32(f"{A}.swiglu_clamp_exp", c["swiglu_limit"])
    wr.add_float32(f"{A}.swiglu_clamp_shexp", c["swiglu_limit"])
    wr.add_uint32(f"{A}.attention.indexer.head_count", c["index_n_heads"])
    wr.add_uint32(f"{A}.attention.indexer.key_length", c["index_head_dim"])
    wr.add_uint32(f"{A}.attention.indexer.top_k", c["index_topk"])
    wr.add_uint32(f"{A}.attention.indexer.kpool", c["index_kpool"])
    wr.add_bool(f"{A}.attention.indexer.kpool_select_tail", True)
    wr.add_array(f"{A}.attention.indexer.types",
                 [1 if t == "full" else 0 for t in c["indexer_types"]])
    wr.add_uint32(f"{A}.hyper_connection.count", c["hc_mult"])
    wr.add_uint32(f"{A}.hyper_connection.sinkhorn_iterations", c["hc_sinkhorn_iters"])
    wr.add_float32(f"{A}.hyper_connection.epsilon", c["hc_eps"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    th.gguf_tokenizer_keys(wr, folder, TEXT)     # kimi_checkpoint's tokenizer keys, TEXT's ids
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr in gguf_tensors(weights()):
        wr.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    th.finish_gguf(wr)
    return th.sha256_file(path)


def build_gguf_once() -> tuple[Path, str]:
    """write_gguf() of build_once()'s folder, once: (path, sha256)."""
    return th.build_gguf_once(_BUILT, NAME, build_once, write_gguf)
