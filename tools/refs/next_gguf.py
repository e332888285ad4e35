"""The tiny Qwen3-Next checkpoint (tools/refs/next_checkpoint.py) as GGUF `qwen3next`, written
with the `gguf` package under llama.cpp's tensor names and keys, as llama.cpp's converter
(conversion/qwen.py's Qwen3NextModel, run with --no-mtp) writes it:

    token_embd, output, output_norm (+1); blk.N.attn_norm, post_attention_norm (+1);
    linear layers: attn_qkv (in_proj_qkvz's q rows of every k head, then k, then v),
    attn_gate (its z rows), ssm_ba (in_proj_ba as it is), ssm_conv1d [C, K], ssm_dt.bias,
    ssm_a (-exp(A_log)), ssm_norm (plain), ssm_out;
    full layers: attn_q (per head [q | gate]), attn_k, attn_v, attn_output, attn_q_norm,
    attn_k_norm (+1);
    every layer: ffn_gate_inp, ffn_{gate,up,down}_exps [E, out, in], ffn_{gate,up,down}_shexp,
    ffn_gate_inp_shexp [1, d].

The tokenizer keys are written from the folder's tokenizer.json as the converter's gpt2 path
writes them (model gpt2, pre gpt-2: the checkpoint's byte-level BPE with GPT-2's split).
tools/refs/record_qwen3next_gguf.py runs the converter too and records how the two files
compare (tests/data/qwen3next/qwen3next-tiny-gguf.json). Needs numpy and gguf only: the
tests regenerate the files and compare their sha256 with the record.

    PYTHONPATH=$PWD .venv/bin/python tools/refs/next_gguf.py OUT_DIR
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

try:
    from tools.refs import next_checkpoint as nc
except ImportError:            # run by path from a reference venv (tools/refs/record_qwen3next_gguf.py)
    import importlib.util
    _s = importlib.util.spec_from_file_location("next_checkpoint", Path(__file__).with_name("next_checkpoint.py"))
    nc = importlib.util.module_from_spec(_s)
    _s.loader.exec_module(nc)


def _tile(x, nk: int, r: int, hd: int, axis: int = 0):
    """v heads from HF's grouped order (k r + i) to the converter's tiled one (i nk + k)."""
    x = np.moveaxis(x, axis, 0)
    rest = x.shape[1:]
    y = x.reshape(nk, r, hd, *rest).transpose(1, 0, 2, *range(3, 3 + len(rest)))
    return np.ascontiguousarray(np.moveaxis(y.reshape(nk * r * hd, *rest), 0, axis))


def gguf_tensors(w: dict, arch: str = "qwen3next", legacy: bool = False) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array in numpy order) of every tensor, the converter's layout
    (arch qwen35moe: the Qwen3_5MoeTextModel converter's: v heads tiled, ssm_beta and
    ssm_alpha apart; legacy: the earlier converter's ssm_in, HF's in_proj_qkvz as it is, in
    place of attn_qkv and attn_gate)."""
    c = nc.CONFIG
    nk, nv, dk, dv = (c["linear_num_key_heads"], c["linear_num_value_heads"],
                      c["linear_key_head_dim"], c["linear_value_head_dim"])
    r = nv // nk
    f = np.float32
    out = [("token_embd.weight", w["model.embed_tokens.weight"]),
           ("output_norm.weight", w["model.norm.weight"] + f(1)),
           ("output.weight", w["lm_head.weight"])]
    for i, kind in enumerate(c["layer_types"]):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        out += [(b + "attn_norm.weight", w[p + "input_layernorm.weight"] + f(1)),
                (b + "post_attention_norm.weight", w[p + "post_attention_layernorm.weight"] + f(1))]
        if kind == "linear_attention" and arch == "qwen35moe":
            a = p + "linear_attn."
            qkvz = w[a + "in_proj_qkvz.weight"]
            d = qkvz.shape[1]
            x = qkvz.reshape(nk, 2 * dk + 2 * r * dv, d)
            flat = lambda t: t.reshape(-1, d)
            ba = w[a + "in_proj_ba.weight"].reshape(nk, 2 * r, d)
            conv = w[a + "conv1d.weight"][:, 0, :]
            K2 = 2 * nk * dk
            out += [(b + "attn_qkv.weight", np.concatenate(
                        [flat(x[:, :dk]), flat(x[:, dk:2 * dk]),
                         _tile(flat(x[:, 2 * dk:2 * dk + r * dv]), nk, r, dv)])),
                    (b + "attn_gate.weight", _tile(flat(x[:, 2 * dk + r * dv:]), nk, r, dv)),
                    (b + "ssm_beta.weight", _tile(flat(ba[:, :r]), nk, r, 1)),
                    (b + "ssm_alpha.weight", _tile(flat(ba[:, r:]), nk, r, 1)),
                    (b + "ssm_conv1d.weight", np.concatenate([conv[:K2], _tile(conv[K2:], nk, r, dv)])),
                    (b + "ssm_dt.bias", _tile(w[a + "dt_bias"], nk, r, 1)),
                    (b + "ssm_a", _tile((-np.exp(w[a + "A_log"].astype(np.float64))).astype(f), nk, r, 1)),
                    (b + "ssm_norm.weight", w[a + "norm.weight"]),
                    (b + "ssm_out.weight", _tile(w[a + "out_proj.weight"], nk, r, dv, axis=1))]
        elif kind == "linear_attention":
            a = p + "linear_attn."
            qkvz = w[a + "in_proj_qkvz.weight"]
            d = qkvz.shape[1]
            x = qkvz.reshape(nk, 2 * dk + 2 * r * dv, d)
            q, k = x[:, :dk], x[:, dk:2 * dk]
            v, z = x[:, 2 * dk:2 * dk + r * dv], x[:, 2 * dk + r * dv:]
            flat = lambda t: t.reshape(-1, d)
            out += ([(b + "ssm_in.weight", qkvz)] if legacy else
                    [(b + "attn_qkv.weight", np.concatenate([flat(q), flat(k), flat(v)])),
                     (b + "attn_gate.weight", flat(z))])
            out += [(b + "ssm_ba.weight", w[a + "in_proj_ba.weight"]),
                    (b + "ssm_conv1d.weight", w[a + "conv1d.weight"][:, 0, :]),
                    (b + "ssm_dt.bias", w[a + "dt_bias"]),
                    # the converter's torch float32 exp equals float64's rounded here
                    (b + "ssm_a", (-np.exp(w[a + "A_log"].astype(np.float64))).astype(f)),
                    (b + "ssm_norm.weight", w[a + "norm.weight"]),
                    (b + "ssm_out.weight", w[a + "out_proj.weight"])]
        else:
            s = p + "self_attn."
            out += [(b + "attn_q.weight", w[s + "q_proj.weight"]),
                    (b + "attn_k.weight", w[s + "k_proj.weight"]),
                    (b + "attn_v.weight", w[s + "v_proj.weight"]),
                    (b + "attn_output.weight", w[s + "o_proj.weight"]),
                    (b + "attn_q_norm.weight", w[s + "q_norm.weight"] + f(1)),
                    (b + "attn_k_norm.weight", w[s + "k_norm.weight"] + f(1))]
        m = p + "mlp."
        gu = w[m + "experts.gate_up_proj"]
        ff = gu.shape[1] // 2
        out += [(b + "ffn_gate_inp.weight", w[m + "gate.weight"]),
                (b + "ffn_gate_exps.weight", gu[:, :ff]),
                (b + "ffn_up_exps.weight", gu[:, ff:]),
                (b + "ffn_down_exps.weight", w[m + "experts.down_proj"]),
                (b + "ffn_gate_shexp.weight", w[m + "shared_expert.gate_proj.weight"]),
                (b + "ffn_up_shexp.weight", w[m + "shared_expert.up_proj.weight"]),
                (b + "ffn_down_shexp.weight", w[m + "shared_expert.down_proj.weight"]),
                (b + "ffn_gate_inp_shexp.weight", w[m + "shared_expert_gate.weight"])]
    return [(n, np.ascontiguousarray(a, dtype=np.float32)) for n, a in out]


def gguf_type(name: str, shape, qtype: str) -> str:
    """The type the converter gives a tensor for --outtype f32 / q8_0 (1-D tensors, norms,
    the router and the shared expert's gate, ssm_a, ssm_conv1d, biases stay F32)."""
    if qtype == "F32" or len(shape) <= 1 or name.endswith(("_norm.weight", ".ssm_conv1d.weight")) \
            or ".ffn_gate_inp" in name or not name.endswith(".weight"):
        return "F32"
    return "Q8_0" if shape[-1] % 32 == 0 else "F16"


def _tokenizer_keys(wr, hf_dir: Path) -> None:
    import gguf
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    tc = json.loads((hf_dir / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocab = dict(tj["model"]["vocab"])
    special = {t["content"]: t["id"] for t in tj.get("added_tokens", [])}
    vocab.update(special)
    by_id = sorted(vocab.items(), key=lambda kv: kv[1])
    assert [i for _, i in by_id] == list(range(nc.CONFIG["vocab_size"]))
    types = [gguf.TokenType.CONTROL if t in special else gguf.TokenType.NORMAL for t, _ in by_id]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    wr.add_tokenizer_model("gpt2")
    wr.add_tokenizer_pre("gpt-2")
    wr.add_token_list([t for t, _ in by_id])
    wr.add_token_types(types)
    wr.add_token_merges(merges)
    wr.add_bos_token_id(vocab[tc["bos_token"]])
    wr.add_eos_token_id(vocab[tc["eos_token"]])
    wr.add_pad_token_id(vocab[tc["pad_token"]])
    wr.add_add_bos_token(bool(tc.get("add_bos_token", False)))
    wr.add_chat_template(tc["chat_template"])


def add_arch_keys(wr, c: dict, arch: str, qtype: str, rope_sections=(1, 1, 0, 0)) -> None:
    """The architecture keys (block count through the rope dimensions) the converter writes
    for config `c` (an HF config's dict), in its order; shared with bench/moe_cpu.py's
    full-size files (rope_sections: qwen35moe's M-RoPE sections, the tiny checkpoint's by
    default)."""
    import gguf
    wr.add_block_count(c["num_hidden_layers"])
    wr.add_context_length(c["max_position_embeddings"])
    wr.add_embedding_length(c["hidden_size"])
    if arch == "qwen3next":          # Qwen3.5's config has no intermediate_size
        wr.add_feed_forward_length(c["intermediate_size"])
    wr.add_head_count(c["num_attention_heads"])
    wr.add_head_count_kv(c["num_key_value_heads"])
    if arch == "qwen35moe":
        wr.add_array("qwen35moe.rope.dimension_sections", list(rope_sections))
    wr.add_rope_freq_base(c["rope_parameters"]["rope_theta"])
    wr.add_layer_norm_rms_eps(c["rms_norm_eps"])
    wr.add_expert_count(c["num_experts"])
    wr.add_expert_used_count(c["num_experts_per_tok"])
    wr.add_key_length(c["head_dim"])
    wr.add_value_length(c["head_dim"])
    wr.add_file_type(gguf.LlamaFileType.ALL_F32 if qtype == "F32" else gguf.LlamaFileType.MOSTLY_Q8_0)
    wr.add_expert_feed_forward_length(c["moe_intermediate_size"])
    wr.add_expert_shared_feed_forward_length(c["shared_expert_intermediate_size"])
    wr.add_ssm_conv_kernel(c["linear_conv_kernel_dim"])
    wr.add_ssm_state_size(c["linear_key_head_dim"])
    wr.add_ssm_group_count(c["linear_num_key_heads"])
    wr.add_ssm_time_step_rank(c["linear_num_value_heads"])
    wr.add_ssm_inner_size(c["linear_value_head_dim"] * c["linear_num_value_heads"])
    wr.add_array(f"{arch}.attention.recurrent_layers",
                 [t == "linear_attention" for t in c["layer_types"]])
    wr.add_full_attention_interval(4)
    wr.add_rope_dimension_count(int(c["head_dim"] * c["rope_parameters"]["partial_rotary_factor"]))


def write_gguf(path, qtype: str = "F32", hf_dir=None, weights_of: str | None = None,
               arch: str = "qwen3next", legacy: bool = False) -> str:
    """Write the GGUF (qtype F32 or Q8_0); returns its sha256. hf_dir: the checkpoint's
    folder for the tokenizer (written to a temporary folder when None). weights_of "Q8_0"
    (with qtype F32): every tensor as the Q8_0 file holds it, dequantized (llama.cpp's
    reference for that file's weights without its Q8_0 activations)."""
    import tempfile

    import gguf
    c = nc.CONFIG
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as t:
        if hf_dir is None:
            hf_dir = Path(t)
            nc.write_tokenizer(hf_dir)
        wr = gguf.GGUFWriter(str(path), arch)
        wr.add_type(gguf.GGUFType.MODEL)
        wr.add_name(nc.NAME if arch == "qwen3next" else "qwen35moe-tiny")
        add_arch_keys(wr, c, arch, qtype)
        _tokenizer_keys(wr, Path(hf_dir))
        wr.add_quantization_version(gguf.GGML_QUANT_VERSION)
        for name, arr in gguf_tensors(nc.weights(), arch, legacy):
            ty = gguf_type(name, arr.shape, qtype)
            if weights_of and gguf_type(name, arr.shape, weights_of) != "F32":
                qt = gguf.GGMLQuantizationType[gguf_type(name, arr.shape, weights_of)]
                arr = np.ascontiguousarray(gguf.quants.dequantize(gguf.quants.quantize(arr, qt), qt)
                                           .reshape(arr.shape), dtype=np.float32)
            if ty == "F32":
                wr.add_tensor(name, arr)
            else:
                qt = gguf.GGMLQuantizationType[ty]
                wr.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        wr.write_header_to_file()
        wr.write_kv_data_to_file()
        wr.write_tensors_to_file()
        wr.close()
    return nc.sha256_file(path)


_BUILT: dict = {}


def build_once(qtype: str, arch: str = "qwen3next") -> tuple[Path, str]:
    """write_gguf() into a per-process temporary folder (tools/refs/scratch.py: removed at the
    process' exit), once a (qtype, arch): for tests."""
    from tools.refs import scratch
    if (qtype, arch) not in _BUILT:
        name = nc.NAME if arch == "qwen3next" else "qwen35moe-tiny"
        p = scratch.folder(f"foldserve-{name}-gguf-") / f"{name}-{qtype}.gguf"
        _BUILT[qtype, arch] = (p, write_gguf(p, qtype, arch=arch))
    return _BUILT[qtype, arch]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    out = Path(ap.parse_args().out_dir)
    for qt in ("F32", "Q8_0"):
        print(write_gguf(out / f"{nc.NAME}-{qt}.gguf", qt), qt)
