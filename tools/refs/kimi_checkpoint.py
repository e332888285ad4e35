"""Kimi-Linear's test material, numpy only (no torch), so the recorder
(tools/refs/record_kimi_linear.py) and the tests make the same arrays from the same recipe:

- KDA_CASES / kda_inputs: seeded inputs of kernels/kda.py's contract (the definition case);
- the tiny checkpoint (CONFIG, weights, write, build_once): see its section below.
"""
from __future__ import annotations

import numpy as np

# the definition cases: one chunk of n positions (n > 64 crosses transformers' chunk of 64),
# H heads of D; `lower_bound` None is Kimi-Linear's softplus gate, a number the safe gate
KDA_CASES = {
    "kimi": {"seed": 11, "n": 70, "H": 2, "D": 8, "K": 4, "eps": 1e-5, "lower_bound": None},
    "safe": {"seed": 12, "n": 70, "H": 2, "D": 8, "K": 4, "eps": 1e-5, "lower_bound": -5.0},
}


def kda_inputs(c: dict) -> dict:
    """A definition case's inputs from numpy's seeded generator."""
    rng = np.random.default_rng(c["seed"])
    n, H, D, K = c["n"], c["H"], c["D"], c["K"]
    C = 3 * H * D
    f = lambda *s: rng.standard_normal(s).astype(np.float32)
    return {"mix": f(n, C), "f": f(n, H * D), "b": f(n, H), "gate": f(n, H * D),
            "conv_w": (f(C, K) * 0.5).astype(np.float32),
            "A_log": np.log(rng.uniform(1.0, 16.0, H)).astype(np.float32),
            "dt_bias": (0.5 * f(H * D) - 2.0).astype(np.float32),
            "norm_w": (1 + 0.1 * f(D)).astype(np.float32)}


# ------------------------------------------------------------------ the tiny checkpoint
"""The tiny Kimi-Linear checkpoint (HF `KimiLinearForCausalLM`): config.json and
model.safetensors written with numpy from seeded generators, under the names transformers
5.25's save_pretrained writes (Moonshot's: `block_sparse_moe.` MLPs, experts' w1 / w3 / w2,
`q_conv1d` / `k_conv1d` / `v_conv1d`, `A_log` [1, 1, H, 1]); the tokenizer is
tools/refs/next_checkpoint.py's (512 ids, ChatML). The same bytes on every run (tests compare
the sha256 with tests/data/kimi_linear/kimi-linear-tiny.json), so the files are regenerated,
never committed. Needs numpy, safetensors and tokenizers only.

    PYTHONPATH=$PWD .venv/bin/python tools/refs/kimi_checkpoint.py OUT_DIR   (OUT_DIR/hf, OUT_DIR/*.gguf)
"""
import argparse  # noqa: E402
import importlib.util  # noqa: E402
from pathlib import Path  # noqa: E402

_spec = importlib.util.spec_from_file_location("tiny_hf", Path(__file__).with_name("tiny_hf.py"))
th = importlib.util.module_from_spec(_spec)     # by its path: tools/refs/tiny_hf.py says why
_spec.loader.exec_module(th)
nc = th.sibling("next_checkpoint")              # its tokenizer: the same 512 ids

NAME = "kimi-linear-tiny"
LAYERS = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2
CONFIG = {
    "architectures": ["KimiLinearForCausalLM"],
    "model_type": "kimi_linear",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "moe_intermediate_size": 96,
    "num_hidden_layers": len(LAYERS),
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "kv_lora_rank": 32,
    "q_lora_rank": None,
    "qk_rope_head_dim": 8,
    "qk_nope_head_dim": 16,
    "v_head_dim": 16,
    "head_dim": 8,
    "qk_head_dim": 24,
    "hidden_act": "silu",
    "rms_norm_eps": 1e-5,
    "model_max_length": 512,
    "tie_word_embeddings": False,
    "attention_bias": False,
    "attention_dropout": 0.0,
    "num_experts": 8,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "num_expert_group": 2,
    "topk_group": 1,
    "moe_renormalize": True,
    "routed_scaling_factor": 2.446,
    "linear_head_dim": 16,
    "linear_num_heads": 4,
    "linear_conv_kernel_dim": 4,
    "layer_types": LAYERS,
    "mlp_layer_types": ["dense"] + ["sparse"] * (len(LAYERS) - 1),
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "dtype": "float32",
}


def kda_weights(model: str, w: dict, a: str, c: dict, a_log_shape: tuple) -> None:
    """One KDA layer's tensors into w under prefix a (`...self_attn.`), as transformers names
    Kimi-Linear's (GLM-5.3-Flash's KDA layers take them too): q / k / v projections and their
    depthwise convs [H*D, 1, K], f_a / f_b, A_log (log of uniform(1, 16), a_log_shape),
    dt_bias (FLA's init: dt in [1e-3, 1e-1] log-uniform, dt_bias its inverse softplus), b_proj,
    g_a / g_b, o_norm, o_proj; drawn as tools/refs/tiny_hf.py's rng(model, name). c: the
    (text) config (hidden_size, linear_num_heads, linear_head_dim, linear_conv_kernel_dim)."""
    d, LH, LD, K = (c["hidden_size"], c["linear_num_heads"], c["linear_head_dim"],
                    c["linear_conv_kernel_dim"])
    put, lin, _ = th.makers(model, w, d)
    for x in "qkv":
        lin(a + f"{x}_proj.weight", LH * LD, d)
        put(a + f"{x}_conv1d.weight", (LH * LD, 1, K), 0.5)
    lin(a + "f_a_proj.weight", LD, d)
    lin(a + "f_b_proj.weight", LH * LD, LD)
    r = th.rng(model, a + "A_log")
    w[a + "A_log"] = np.log(r.uniform(1.0, 16.0, a_log_shape)).astype(np.float32)
    dt = np.exp(th.rng(model, a + "dt_bias").uniform(np.log(1e-3), np.log(1e-1), LH * LD))
    w[a + "dt_bias"] = (dt + np.log(-np.expm1(-dt))).astype(np.float32)
    lin(a + "b_proj.weight", LH, d)
    lin(a + "g_a_proj.weight", LD, d)
    lin(a + "g_b_proj.weight", LH * LD, LD)
    put(a + "o_norm.weight", (LD,), 0.1, 1.0)
    lin(a + "o_proj.weight", d, LH * LD)


def weights() -> dict[str, np.ndarray]:
    c = CONFIG
    d, V, H = c["hidden_size"], c["vocab_size"], c["num_attention_heads"]
    C, R, N, Vd = c["kv_lora_rank"], c["qk_rope_head_dim"], c["qk_nope_head_dim"], c["v_head_dim"]
    E, eff, ff = c["num_experts"], c["moe_intermediate_size"], c["intermediate_size"]
    w: dict[str, np.ndarray] = {}
    put, lin, mlp = th.makers(NAME, w, d)
    put("model.embed_tokens.weight", (V, d), 1.0)
    put("model.norm.weight", (d,), 0.1, 1.0)
    lin("lm_head.weight", V, d)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        put(p + "input_layernorm.weight", (d,), 0.1, 1.0)
        put(p + "post_attention_layernorm.weight", (d,), 0.1, 1.0)
        a = p + "self_attn."
        if kind == "linear_attention":
            kda_weights(NAME, w, a, c, (1, 1, c["linear_num_heads"], 1))
        else:
            lin(a + "q_proj.weight", H * (N + R), d)
            lin(a + "kv_a_proj_with_mqa.weight", C + R, d)
            put(a + "kv_a_layernorm.weight", (C,), 0.1, 1.0)
            lin(a + "kv_b_proj.weight", H * (N + Vd), C)
            lin(a + "o_proj.weight", d, H * Vd)
        m = p + "block_sparse_moe."
        if c["mlp_layer_types"][i] == "dense":
            mlp(m, ff)
            continue
        lin(m + "gate.weight", E, d, 2.0)
        put(m + "gate.e_score_correction_bias", (E,), 0.1)
        for e in range(E):
            lin(m + f"experts.{e}.w1.weight", eff, d)
            lin(m + f"experts.{e}.w3.weight", eff, d)
            lin(m + f"experts.{e}.w2.weight", d, eff)
        mlp(m + "shared_experts.", eff * c["num_shared_experts"])
    return w


def write(out_dir) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    return th.write_folder(out_dir, CONFIG, weights(), nc.write_tokenizer)


# ------------------------------------------------------------------ the GGUF
def kda_gguf(w: dict, a: str, b: str) -> list[tuple[str, np.ndarray]]:
    """A KDA layer's tensors (prefix a) under llama.cpp's names (block prefix b) and layouts:
    the convs as (1, d_inner, 1, K), ssm_a = -exp(A_log), dt_bias as ssm_dt.bias."""
    out = [(b + f"attn_{x}.weight", w[a + f"{x}_proj.weight"]) for x in "qkv"]
    for x in "qkv":
        cw = w[a + f"{x}_conv1d.weight"]
        out.append((b + f"ssm_conv1d_{x}.weight", cw.reshape(1, cw.shape[0], 1, cw.shape[2])))
    return out + [(b + "ssm_f_a.weight", w[a + "f_a_proj.weight"]),
                  (b + "ssm_f_b.weight", w[a + "f_b_proj.weight"]),
                  (b + "ssm_beta.weight", w[a + "b_proj.weight"]),
                  (b + "ssm_a", -np.exp(w[a + "A_log"])),
                  (b + "ssm_dt.bias", w[a + "dt_bias"]),
                  (b + "ssm_g_a.weight", w[a + "g_a_proj.weight"]),
                  (b + "ssm_g_b.weight", w[a + "g_b_proj.weight"]),
                  (b + "ssm_norm.weight", w[a + "o_norm.weight"]),
                  (b + "attn_output.weight", w[a + "o_proj.weight"])]


def gguf_tensors(w: dict[str, np.ndarray]) -> list[tuple[str, np.ndarray]]:
    """The HF weights under llama.cpp's `kimi-linear` names and layouts, as its converter
    (conversion/kimi_linear.py) writes them: the convs as numpy (1, d_inner, 1, K), A_log as
    ssm_a = -exp(A_log) [1, 1, H, 1], dt_bias as ssm_dt.bias, kv_b split into attn_k_b
    [H, C, N] (transposed) and attn_v_b [H, V, C], the experts stacked [E, out, in]."""
    c = CONFIG
    H, N, Vd = c["num_attention_heads"], c["qk_nope_head_dim"], c["v_head_dim"]
    out = [("token_embd.weight", w["model.embed_tokens.weight"]),
           ("output_norm.weight", w["model.norm.weight"]), ("output.weight", w["lm_head.weight"])]
    for i, kind in enumerate(c["layer_types"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        a, m = p + "self_attn.", p + "block_sparse_moe."
        out += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"])]
        if kind == "linear_attention":
            out += kda_gguf(w, a, b)
        else:
            kv_b = w[a + "kv_b_proj.weight"].reshape(H, N + Vd, -1)
            out += [(b + "attn_q.weight", w[a + "q_proj.weight"]),
                    (b + "attn_kv_a_mqa.weight", w[a + "kv_a_proj_with_mqa.weight"]),
                    (b + "attn_kv_a_norm.weight", w[a + "kv_a_layernorm.weight"]),
                    (b + "attn_k_b.weight", np.ascontiguousarray(kv_b[:, :N].transpose(0, 2, 1))),
                    (b + "attn_v_b.weight", np.ascontiguousarray(kv_b[:, N:])),
                    (b + "attn_output.weight", w[a + "o_proj.weight"])]
        out.append((b + "ffn_norm.weight", w[p + "post_attention_layernorm.weight"]))
        if c["mlp_layer_types"][i] == "dense":
            out += [(b + f"ffn_{x}.weight", w[m + f"{x}_proj.weight"]) for x in ("gate", "up", "down")]
            continue
        out += [(b + "ffn_gate_inp.weight", w[m + "gate.weight"]),
                (b + "exp_probs_b.bias", w[m + "gate.e_score_correction_bias"])]
        for wid, x in (("w1", "gate"), ("w3", "up"), ("w2", "down")):
            out.append((b + f"ffn_{x}_exps.weight", np.stack(
                [w[m + f"experts.{e}.{wid}.weight"] for e in range(c["num_experts"])])))
        out += [(b + f"ffn_{x}_shexp.weight", w[m + f"shared_experts.{x}_proj.weight"])
                for x in ("gate", "up", "down")]
    return out


def gguf_kda_keys(wr, c: dict, name: str, context: int) -> None:
    """The keys a KDA model's GGUF starts with, in llama.cpp's order: the type (model), name,
    block count, context, embedding and feed-forward lengths, head count, head_count_kv (0 on
    the KDA layers, 1 on the others), RMS epsilon, vocabulary size, conv kernel, KDA head dim.
    c: the (text) config."""
    import gguf
    wr.add_type(gguf.GGUFType.MODEL)
    wr.add_name(name)
    wr.add_block_count(c["num_hidden_layers"])
    wr.add_context_length(context)
    wr.add_embedding_length(c["hidden_size"])
    wr.add_feed_forward_length(c["intermediate_size"])
    wr.add_head_count(c["num_attention_heads"])
    wr.add_head_count_kv([0 if t == "linear_attention" else 1 for t in c["layer_types"]])
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_vocab_size(c["vocab_size"])
    wr.add_ssm_conv_kernel(c["linear_conv_kernel_dim"])
    wr.add_kda_head_dim(c["linear_head_dim"])


def write_gguf(folder, path) -> str:
    """The F32 GGUF `kimi-linear` of the HF folder's weights (written with the gguf package
    under llama.cpp's names and keys: its converter at this commit refuses the folder
    transformers saves); returns its sha256."""
    import gguf
    c = CONFIG
    folder, path = Path(folder), Path(path)
    wr = gguf.GGUFWriter(str(path), "kimi-linear")
    gguf_kda_keys(wr, c, NAME, c["model_max_length"])
    wr.add_kv_lora_rank(c["kv_lora_rank"])
    wr.add_rope_dimension_count(c["qk_rope_head_dim"])
    wr.add_key_length(c["kv_lora_rank"] + c["qk_rope_head_dim"])
    wr.add_key_length_mla(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
    wr.add_value_length_mla(c["v_head_dim"])
    wr.add_expert_count(c["num_experts"])
    wr.add_expert_used_count(c["num_experts_per_token"])
    wr.add_expert_feed_forward_length(c["moe_intermediate_size"])
    wr.add_expert_shared_count(c["num_shared_experts"])
    wr.add_leading_dense_block_count(c["mlp_layer_types"].count("dense"))
    wr.add_expert_weights_scale(c["routed_scaling_factor"])
    wr.add_expert_weights_norm(c["moe_renormalize"])
    wr.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
    wr.add_expert_group_count(c["num_expert_group"])
    wr.add_expert_group_used_count(c["topk_group"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32)
    th.gguf_tokenizer_keys(wr, folder, CONFIG)
    wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
    for name, arr in gguf_tensors(weights()):
        wr.add_tensor(name, np.ascontiguousarray(arr, dtype=np.float32))
    th.finish_gguf(wr)
    return th.sha256_file(path)


# tensors a Q8_0 copy keeps F32: llama-quantize's kept-F32 list for kimi-linear / glm5-next
# (bench/moe_cpu.py's _GLM53_F32: the mHC, the indexer, KDA's small projections, kv_a, kv_b),
# norms and the router; and attn_output, whose heads of 16 columns (the tiny checkpoints') are
# half a Q8_0 block, so a TP split by heads would cut a block (refused at load)
Q8_0_KEEP_F32 = ("hc_", "indexer", "ssm_", "attn_kv_a_mqa", "attn_k_b", "attn_v_b", "attn_kv_b",
                 "ffn_gate_inp", "norm", "attn_output")


def q8_0_copy(src, dst) -> list[str]:
    """src (an F32 GGUF) with its weight matrices as Q8_0 blocks (gguf-py's quantizer), those
    named in Q8_0_KEEP_F32 or not a whole number of 32-column blocks kept F32: the layout
    llama-quantize writes for these archs, at the tiny checkpoints' sizes. Returns the names
    made Q8_0."""
    import gguf
    r = gguf.GGUFReader(str(src))
    f = r.fields["general.architecture"]
    w = gguf.GGUFWriter(str(dst), bytes(f.parts[f.data[0]]).decode())
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture":
            continue
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            w.add_key_value(f.name, f.contents(), f.types[0], sub_type=f.types[1])
        else:
            w.add_key_value(f.name, f.contents(), f.types[0])
    made = []
    for t in r.tensors:
        a = np.asarray(t.data, np.float32).reshape([int(x) for x in reversed(t.shape)])
        if t.name.endswith(".weight") and a.ndim >= 2 and a.shape[-1] % 32 == 0 \
                and not any(k in t.name for k in Q8_0_KEEP_F32):
            w.add_tensor(t.name, gguf.quants.quantize(a, gguf.GGMLQuantizationType.Q8_0),
                         raw_dtype=gguf.GGMLQuantizationType.Q8_0)
            made.append(t.name)
        else:
            w.add_tensor(t.name, a)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return made


_BUILT: dict = {}


def build_once() -> tuple[Path, dict]:
    """write() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once: for tests."""
    return th.build_once(_BUILT, NAME, write)


def build_gguf_once() -> tuple[Path, str]:
    """write_gguf() of build_once()'s folder, once: (path, sha256)."""
    return th.build_gguf_once(_BUILT, NAME, build_once, write_gguf)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="The tiny Kimi-Linear checkpoint")
    ap.add_argument("out_dir")
    out = Path(ap.parse_args().out_dir)
    for f, h in write(out / "hf").items():
        print(h, f"hf/{f}")
    print(write_gguf(out / "hf", out / f"{NAME}-F32.gguf"), f"{NAME}-F32.gguf")
