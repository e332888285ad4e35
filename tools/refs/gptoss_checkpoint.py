"""A tiny deterministic gpt-oss checkpoint (GptOssForCausalLM), written without torch.

    python -m tools.refs.gptoss_checkpoint OUT_DIR

writes `OUT_DIR/gptoss-tiny/hf/` (config.json, generation_config.json, model.safetensors in
float32, the default model's tokenizer files) and prints each file's sha256. The GGUFs
(llama.cpp's converter on this folder, F32; llama-quantize MXFP4_MOE on that) and the
references are made by tools/refs/record_gptoss.py.

Contracts (as tools/refs/moe_checkpoint.py's, whose draws and tokenizer this reuses):
- The weights are a pure function of `GptOssSpec` (its seed included), through
  moe_checkpoint.normalish: the same bytes on every machine.
- The tensor names and shapes are transformers 5.25's GptOssForCausalLM parameters: the
  experts fused, `mlp.experts.gate_up_proj` [E, d, 2 ff] with gate and up interleaved
  column by column (gate = 0::2, up = 1::2), `gate_up_proj_bias` [E, 2 ff], `down_proj`
  [E, ff, d], `down_proj_bias` [E, d] (x @ W), the router `mlp.router.{weight,bias}`, the
  attention sinks `self_attn.sinks` [heads]; record_gptoss.py loads it in transformers with
  no missing or unexpected key.
- The shape makes every feature matter at a few dozen tokens: 4 layers (sliding, full,
  sliding, full) with a sliding window of 8; sinks of spread 1; expert gate/up weights
  large enough that the SwiGLU clamp (7) is met; YaRN as gpt-oss configures it.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from tools.refs import moe_checkpoint as mc


@dataclass(frozen=True)
class GptOssSpec:
    name: str = "gptoss-tiny"
    family: str = "gpt-oss"
    seed: int = 3701
    n_layer: int = 4
    hidden: int = 64
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 16
    n_expert: int = 8
    n_expert_used: int = 4
    expert_ff: int = 64
    sliding_window: int = 8
    vocab: int = 49152
    rope_theta: float = 150000.0
    rms_eps: float = 1e-5
    max_pos: int = 8192
    yarn_factor: float = 32.0
    yarn_original: int = 4096
    swiglu_limit: float = 7.0
    embed_std: float = 1.0
    head_std: float = 0.7
    norm_std: float = 0.1
    bias_std: float = 0.1
    sink_std: float = 1.0
    router_gain: float = 1.5
    expert_gain: float = 3.0
    bos_id: int = 1
    eos_id: int = 2
    pad_id: int = 2


SPECS = {"gptoss-tiny": GptOssSpec()}


def hf_weights(spec: GptOssSpec) -> dict[str, np.ndarray]:
    """HF tensor name -> float32 array, as transformers saves GptOssForCausalLM."""
    w: dict[str, np.ndarray] = {}
    d, hd, E, ff = spec.hidden, spec.head_dim, spec.n_expert, spec.expert_ff

    def put(name, shape, std, offset=0.0):
        x = mc.normalish(spec, name, shape, std)
        w[name] = (x + np.float32(offset)).astype(np.float32) if offset else x

    put("model.embed_tokens.weight", (spec.vocab, d), spec.embed_std)
    for i in range(spec.n_layer):
        p = f"model.layers.{i}."
        put(p + "input_layernorm.weight", (d,), spec.norm_std, 1.0)
        put(p + "post_attention_layernorm.weight", (d,), spec.norm_std, 1.0)
        for proj, out_f in (("q", spec.n_head * hd), ("k", spec.n_head_kv * hd), ("v", spec.n_head_kv * hd)):
            put(p + f"self_attn.{proj}_proj.weight", (out_f, d), 1.0 / math.sqrt(d))
            put(p + f"self_attn.{proj}_proj.bias", (out_f,), spec.bias_std)
        put(p + "self_attn.o_proj.weight", (d, spec.n_head * hd), 1.0 / math.sqrt(spec.n_head * hd))
        put(p + "self_attn.o_proj.bias", (d,), spec.bias_std)
        put(p + "self_attn.sinks", (spec.n_head,), spec.sink_std)
        put(p + "mlp.router.weight", (E, d), spec.router_gain / math.sqrt(d))
        put(p + "mlp.router.bias", (E,), spec.bias_std)
        put(p + "mlp.experts.gate_up_proj", (E, d, 2 * ff), spec.expert_gain / math.sqrt(d))
        put(p + "mlp.experts.gate_up_proj_bias", (E, 2 * ff), spec.bias_std)
        put(p + "mlp.experts.down_proj", (E, ff, d), 1.0 / math.sqrt(ff))
        put(p + "mlp.experts.down_proj_bias", (E, d), spec.bias_std)
    put("model.norm.weight", (d,), spec.norm_std, 1.0)
    put("lm_head.weight", (spec.vocab, d), spec.head_std / math.sqrt(d))
    return w


def hf_config(spec: GptOssSpec) -> dict:
    return {
        "architectures": ["GptOssForCausalLM"],
        "attention_bias": True,
        "attention_dropout": 0.0,
        "bos_token_id": spec.bos_id,
        "dtype": "float32",
        "eos_token_id": spec.eos_id,
        "head_dim": spec.head_dim,
        "hidden_act": "silu",
        "hidden_size": spec.hidden,
        "initializer_range": 0.02,
        "intermediate_size": spec.expert_ff,
        "layer_types": ["sliding_attention" if i % 2 == 0 else "full_attention"
                        for i in range(spec.n_layer)],
        "max_position_embeddings": spec.max_pos,
        "model_type": "gpt_oss",
        "num_attention_heads": spec.n_head,
        "num_experts_per_tok": spec.n_expert_used,
        "num_hidden_layers": spec.n_layer,
        "num_key_value_heads": spec.n_head_kv,
        "num_local_experts": spec.n_expert,
        "output_router_logits": False,
        "pad_token_id": spec.pad_id,
        "rms_norm_eps": spec.rms_eps,
        "rope_parameters": {"beta_fast": 32.0, "beta_slow": 1.0, "factor": spec.yarn_factor,
                            "original_max_position_embeddings": spec.yarn_original,
                            "rope_theta": spec.rope_theta, "rope_type": "yarn", "truncate": False},
        "router_aux_loss_coef": 0.9,
        "sliding_window": spec.sliding_window,
        "swiglu_limit": spec.swiglu_limit,
        "tie_word_embeddings": False,
        "transformers_version": mc.TRANSFORMERS_VERSION,
        "use_cache": True,
        "vocab_size": spec.vocab,
    }


def write_hf(spec: GptOssSpec, out_dir: str | Path, weights: dict | None = None) -> dict[str, str]:
    """Write the HF folder; returns {file name: sha256}."""
    from safetensors.numpy import save_file
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    w = hf_weights(spec) if weights is None else weights
    (out / "config.json").write_text(mc._json_text(hf_config(spec)), encoding="utf-8")
    (out / "generation_config.json").write_text(mc._json_text(mc.generation_config(spec)), encoding="utf-8")
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in sorted(w.items())},
              str(out / "model.safetensors"), metadata={"format": "pt"})
    mc._write_tokenizer(out, mc.default_gguf())
    return {p.name: mc.sha256_file(p) for p in sorted(out.iterdir()) if p.is_file()}


def spec_dict(spec: GptOssSpec) -> dict:
    return asdict(spec)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out")
    ap.add_argument("--name", default="gptoss-tiny", choices=list(SPECS))
    a = ap.parse_args(argv)
    spec = SPECS[a.name]
    for f, digest in write_hf(spec, Path(a.out) / spec.name / "hf").items():
        print(f"{digest}  {spec.name}/hf/{f}")


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------- GGUF (as llama.cpp makes it)

def gguf_tensors(spec: GptOssSpec, w: dict) -> list[tuple[str, np.ndarray]]:
    """(GGUF name, float32 array in numpy order) as llama.cpp's converter writes the HF
    weights: gate/up de-interleaved ([E, ff, d] each), down [E, d, ff], biases [E, out]."""
    out = [("token_embd.weight", w["model.embed_tokens.weight"])]
    for i in range(spec.n_layer):
        p, b = f"model.layers.{i}.", f"blk.{i}."
        gu, gub = w[p + "mlp.experts.gate_up_proj"], w[p + "mlp.experts.gate_up_proj_bias"]
        out += [
            (b + "attn_norm.weight", w[p + "input_layernorm.weight"]),
            (b + "post_attention_norm.weight", w[p + "post_attention_layernorm.weight"]),
            (b + "ffn_gate_inp.weight", w[p + "mlp.router.weight"]),
            (b + "ffn_gate_inp.bias", w[p + "mlp.router.bias"]),
            (b + "ffn_gate_exps.weight", gu[:, :, 0::2].transpose(0, 2, 1)),
            (b + "ffn_up_exps.weight", gu[:, :, 1::2].transpose(0, 2, 1)),
            (b + "ffn_down_exps.weight", w[p + "mlp.experts.down_proj"].transpose(0, 2, 1)),
            (b + "ffn_gate_exps.bias", gub[:, 0::2]),
            (b + "ffn_up_exps.bias", gub[:, 1::2]),
            (b + "ffn_down_exps.bias", w[p + "mlp.experts.down_proj_bias"]),
            (b + "attn_sinks.weight", w[p + "self_attn.sinks"]),
        ]
        for a, h in (("q", "q"), ("k", "k"), ("v", "v"), ("output", "o")):
            out += [(b + f"attn_{a}.weight", w[p + f"self_attn.{h}_proj.weight"]),
                    (b + f"attn_{a}.bias", w[p + f"self_attn.{h}_proj.bias"])]
    out += [("output_norm.weight", w["model.norm.weight"]), ("output.weight", w["lm_head.weight"])]
    return out


def gguf_type(name: str, shape, qtype: str) -> str:
    """F32: every tensor F32 (convert --outtype f32). MXFP4 (llama-quantize MXFP4_MOE): the
    3-D expert weights MXFP4, the other 2-D matrices Q8_0 but the router, the rest F32."""
    if qtype == "F32" or len(shape) == 1 or ".ffn_gate_inp." in name or not name.endswith(".weight"):
        return "F32"
    if "_exps." in name:
        return "MXFP4" if len(shape) == 3 else "F32"
    return "Q8_0"


def add_arch_keys(wr, spec: GptOssSpec) -> None:
    """The gpt-oss architecture keys llama.cpp's converter writes (block count through the
    expert FF), in its order; shared with bench/moe_cpu.py's full-size files."""
    import gguf
    wr.add_block_count(spec.n_layer)
    wr.add_context_length(spec.max_pos)
    wr.add_embedding_length(spec.hidden)
    wr.add_feed_forward_length(spec.expert_ff)
    wr.add_head_count(spec.n_head)
    wr.add_head_count_kv(spec.n_head_kv)
    wr.add_rope_scaling_type(gguf.RopeScalingType.YARN)
    wr.add_rope_scaling_factor(spec.yarn_factor)
    wr.add_rope_scaling_orig_ctx_len(spec.yarn_original)
    wr.add_rope_scaling_yarn_beta_fast(32.0)
    wr.add_rope_scaling_yarn_beta_slow(1.0)
    wr.add_rope_freq_base(spec.rope_theta)
    wr.add_layer_norm_rms_eps(spec.rms_eps)
    wr.add_expert_count(spec.n_expert)
    wr.add_expert_used_count(spec.n_expert_used)
    wr.add_key_length(spec.head_dim)
    wr.add_value_length(spec.head_dim)
    wr.add_sliding_window(spec.sliding_window)
    wr.add_expert_feed_forward_length(spec.expert_ff)


def write_gguf(spec: GptOssSpec, path: str | Path, qtype: str = "F32") -> Path:
    """A GGUF of the checkpoint with llama.cpp's names, keys and types (tokenizer keys: the
    default model's); tensor_digest() equals the recorded digest of llama.cpp's own file."""
    import gguf
    w = hf_weights(spec)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    wr = gguf.GGUFWriter(str(path), "gpt-oss")
    wr.add_type(gguf.GGUFType.MODEL)
    wr.add_name(spec.name)
    add_arch_keys(wr, spec)
    mc._copy_tokenizer_keys(wr, mc.default_gguf())
    for name, arr in gguf_tensors(spec, w):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        t = gguf_type(name, arr.shape, qtype)
        if t == "F32":
            wr.add_tensor(name, arr)
        else:
            qt = gguf.GGMLQuantizationType[t]
            wr.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
    wr.write_header_to_file()
    wr.write_kv_data_to_file()
    wr.write_tensors_to_file()
    wr.close()
    return path


def tensor_digest(path: str | Path) -> str:
    """sha256 over every tensor's (name, type, shape, bytes), in name order: the weights of a
    GGUF whatever its metadata."""
    import hashlib
    from gguf import GGUFReader
    h = hashlib.sha256()
    for t in sorted(GGUFReader(str(path)).tensors, key=lambda t: t.name):
        h.update(f"{t.name}|{t.tensor_type.name}|{list(map(int, t.shape))}|".encode())
        h.update(np.ascontiguousarray(t.data).view(np.uint8).tobytes())
    return h.hexdigest()
