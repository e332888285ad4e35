"""The tiny Qwen3-Next checkpoint (HF `Qwen3NextForCausalLM`): config.json and
model.safetensors written with numpy from seeded generators, under transformers 5.25's
parameter names (the experts as its fused 3-D `mlp.experts.gate_up_proj` [E, 2 ff, d] and
`mlp.experts.down_proj` [E, d, ff]), the RMSNorm weights zero-centred as HF stores them.

    PYTHONPATH=$PWD .venv/bin/python tools/refs/next_checkpoint.py OUT_DIR

A tiny byte-level BPE tokenizer of exactly the model's 512 ids (3 special tokens, the 256
bytes, 253 merges of frequent letter pairs; a ChatML template), so the folder serves; the
references (tools/refs/record_qwen3next.py) are token ids. The same bytes
on every run (tests compare the sha256 with tests/data/qwen3next/qwen3next-tiny.json), so
the files are regenerated, never committed. Needs numpy and safetensors only.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import numpy as np

_spec = importlib.util.spec_from_file_location("tiny_hf", Path(__file__).with_name("tiny_hf.py"))
th = importlib.util.module_from_spec(_spec)     # by its path: tools/refs/tiny_hf.py says why
_spec.loader.exec_module(th)
sha256_file = th.sha256_file                    # the callers of nc.sha256_file

NAME = "qwen3next-tiny"
CONFIG = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "vocab_size": 512,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "hidden_act": "silu",
    "max_position_embeddings": 512,
    "rms_norm_eps": 1e-6,
    "tie_word_embeddings": False,
    "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                        "partial_rotary_factor": 0.25},
    "attention_bias": False,
    "linear_conv_kernel_dim": 4,
    "linear_key_head_dim": 16,
    "linear_value_head_dim": 16,
    "linear_num_key_heads": 2,
    "linear_num_value_heads": 4,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 64,
    "shared_expert_intermediate_size": 64,
    "num_experts_per_tok": 2,
    "num_experts": 8,
    "norm_topk_prob": True,
    "mlp_only_layers": [],
    "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2,
    "bos_token_id": 1,
    "eos_token_id": 2,
    "torch_dtype": "float32",
}


def weights() -> dict[str, np.ndarray]:
    c = CONFIG
    d, V, hd, H, KV = c["hidden_size"], c["vocab_size"], c["head_dim"], c["num_attention_heads"], \
        c["num_key_value_heads"]
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"],
                      c["linear_key_head_dim"], c["linear_value_head_dim"])
    E, eff, sff, K = c["num_experts"], c["moe_intermediate_size"], \
        c["shared_expert_intermediate_size"], c["linear_conv_kernel_dim"]
    w: dict[str, np.ndarray] = {}
    put, lin, _ = th.makers(NAME, w, d)
    put("model.embed_tokens.weight", (V, d), 1.0)
    put("model.norm.weight", (d,), 0.1)                    # zero-centred: (1 + w)
    lin("lm_head.weight", V, d)
    for i, kind in enumerate(c["layer_types"]):
        p = f"model.layers.{i}."
        put(p + "input_layernorm.weight", (d,), 0.1)
        put(p + "post_attention_layernorm.weight", (d,), 0.1)
        if kind == "linear_attention":
            a = p + "linear_attn."
            lin(a + "in_proj_qkvz.weight", 2 * nk * dk + 2 * nv * dv, d)
            lin(a + "in_proj_ba.weight", 2 * nv, d)
            put(a + "conv1d.weight", (2 * nk * dk + nv * dv, 1, K), 0.5)
            put(a + "dt_bias", (nv,), 0.3, 1.0)
            w[a + "A_log"] = np.log(th.rng(NAME, a + "A_log").uniform(0.5, 4.0, nv)).astype(np.float32)
            put(a + "norm.weight", (dv,), 0.1, 1.0)        # the gated norm: plain w
            lin(a + "out_proj.weight", d, nv * dv)
        else:
            s = p + "self_attn."
            lin(s + "q_proj.weight", 2 * H * hd, d)
            lin(s + "k_proj.weight", KV * hd, d)
            lin(s + "v_proj.weight", KV * hd, d)
            lin(s + "o_proj.weight", d, H * hd)
            put(s + "q_norm.weight", (hd,), 0.1)
            put(s + "k_norm.weight", (hd,), 0.1)
        m = p + "mlp."
        lin(m + "gate.weight", E, d, 2.0)
        put(m + "experts.gate_up_proj", (E, 2 * eff, d), 1 / np.sqrt(d))
        put(m + "experts.down_proj", (E, d, eff), 1 / np.sqrt(eff))
        lin(m + "shared_expert.gate_proj.weight", sff, d)
        lin(m + "shared_expert.up_proj.weight", sff, d)
        lin(m + "shared_expert.down_proj.weight", d, sff)
        lin(m + "shared_expert_gate.weight", 1, d)
    return w


SPECIALS = ["<|pad|>", "<|im_start|>", "<|im_end|>"]        # ids 0, 1 (bos), 2 (eos)
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
            "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def tokenizer_json() -> str:
    """tokenizer.json text: byte-level BPE over ids 0..511."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    alphabet = ByteLevel.alphabet()
    alphabet.sort(key=lambda ch: ord(ch))
    vocab = {t: i for i, t in enumerate(SPECIALS)}
    for ch in alphabet:
        vocab[ch] = len(vocab)
    common = "Ġetaoinshrdlucmf"                                 # Ġ: a space in ByteLevel
    merges = []
    for x in common:
        for y in common:
            if len(vocab) < CONFIG["vocab_size"] and x + y not in vocab:
                merges.append((x, y))
                vocab[x + y] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    from tokenizers import AddedToken
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    assert tok.get_vocab_size() == CONFIG["vocab_size"], tok.get_vocab_size()
    return tok.to_str(pretty=True) + "\n"


def write_tokenizer(out: Path) -> None:
    (out / "tokenizer.json").write_text(tokenizer_json(), encoding="utf-8")
    cfg = {"bos_token": SPECIALS[1], "eos_token": SPECIALS[2], "pad_token": SPECIALS[0],
           "add_bos_token": False, "model_max_length": CONFIG["max_position_embeddings"],
           "tokenizer_class": "PreTrainedTokenizerFast", "chat_template": TEMPLATE}
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    gen = {"bos_token_id": 1, "eos_token_id": 2, "do_sample": False}
    (out / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")


def write(out_dir) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    return th.write_folder(out_dir, CONFIG, weights(), write_tokenizer)


_BUILT: dict = {}


def build_once() -> tuple[Path, dict]:
    """write() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once: for tests."""
    return th.build_once(_BUILT, NAME, write)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    for f, h in write(ap.parse_args().out_dir).items():
        print(h, f)
