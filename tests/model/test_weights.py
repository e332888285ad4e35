"""Weight loading: GGUF, Hugging Face safetensors and dummy:SHAPE give the same contract.

float32 C-contiguous arrays under HF llama names, [out, in], lm_head the embedding
object itself when tied; a GGUF's quantized matrices as Blocks ([out, in], the file's
bytes); unsupported architectures refused by name.
"""
from __future__ import annotations

import json
import logging
import struct
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from server.shapes.spec import SHAPES, UnsupportedModel
from server.engine.weights import WeightsError, dummy_identity, dummy_tensor, load, n_floats, tensor_shapes
from server.engine.weights import dummy as dummy_mod
from server.engine.weights import permute
from kernels.blocks import Blocks

GOLDEN = Path(__file__).resolve().parents[1] / "data/smollm2-135m-instruct-q4_1.json"   # tests/data/README.md


def real_gguf() -> str:
    from server.engine.locate import ModelNotFound, default_gguf
    try:
        return default_gguf()
    except ModelNotFound as e:
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def smollm():
    path = real_gguf()
    t0 = time.monotonic()
    loaded = load(path, progress=False)
    return loaded, time.monotonic() - t0


def assert_contract(loaded):
    want = tensor_shapes(loaded.spec)
    assert set(loaded.tensors) == set(want)
    for name, shape in want.items():
        x = loaded.tensors[name]
        assert x.shape == shape, name
        if isinstance(x, Blocks):
            assert len(shape) == 2 and x.data.dtype == np.uint8 and x.data.flags.c_contiguous, name
            continue
        assert x.dtype == np.float32 and x.flags.c_contiguous, name
    head, embed = loaded.tensors["lm_head.weight"], loaded.tensors["model.embed_tokens.weight"]
    assert (head is embed) == loaded.spec.tie_embeddings


# ---------------------------------------------------------------- the real GGUF

def test_real_gguf_spec_and_contract(smollm):
    loaded, seconds = smollm
    s = loaded.spec
    assert (s.arch, s.n_layers, s.d_model, s.n_heads, s.n_kv_heads, s.head_dim, s.d_ff, s.vocab) == \
        ("llama", 30, 576, 9, 3, 64, 1536, 49152)
    assert s.tie_embeddings and s.rope_theta == 100000.0 and s.rms_eps == 1e-5
    assert s.max_context == 8192 and not s.qkv_bias and not s.qk_norm
    assert_contract(loaded)
    assert loaded.gguf_path == loaded.source and loaded.hf_dir is None
    assert seconds < 15, f"loading the 135M GGUF took {seconds:.1f} s"


def test_real_gguf_identity(smollm):
    loaded, _ = smollm
    ident = loaded.identity
    assert ident["architecture"] == "llama" and ident["config"] == loaded.spec.as_dict()
    assert ident["tensors"]["token_embd.weight"] == {"shape": [49152, 576], "dtype": "Q8_0"}
    assert ident["tensors"]["blk.0.attn_q.weight"] == {"shape": [576, 576], "dtype": "Q4_1"}
    assert len(ident["sha256"]) == 64


def _first_logits(t: dict, spec, ids: list[int]) -> np.ndarray:
    """A whole-prompt llama forward in plain numpy (HF rotary halves): logits of the last position."""
    def rms(x, w):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + spec.rms_eps) * w

    n, hd, H, K = len(ids), spec.head_dim, spec.n_heads, spec.n_kv_heads
    inv = spec.rope_theta ** (-np.arange(0, hd, 2) / hd)
    ang = np.arange(n)[:, None] * inv[None, :]
    cos, sin = np.cos(np.concatenate([ang, ang], -1)), np.sin(np.concatenate([ang, ang], -1))

    def rope(x):  # x: [heads, n, hd]
        rot = np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1)
        return x * cos + rot * sin

    x = t["model.embed_tokens.weight"][ids].astype(np.float64)
    mask = np.triu(np.full((n, n), -np.inf), 1)
    for i in range(spec.n_layers):
        p = f"model.layers.{i}."
        h = rms(x, t[p + "input_layernorm.weight"])
        q = rope((h @ t[p + "self_attn.q_proj.weight"].T).reshape(n, H, hd).transpose(1, 0, 2))
        k = rope((h @ t[p + "self_attn.k_proj.weight"].T).reshape(n, K, hd).transpose(1, 0, 2))
        v = (h @ t[p + "self_attn.v_proj.weight"].T).reshape(n, K, hd).transpose(1, 0, 2)
        k, v = np.repeat(k, H // K, 0), np.repeat(v, H // K, 0)
        a = q @ k.transpose(0, 2, 1) / np.sqrt(hd) + mask
        a = np.exp(a - a.max(-1, keepdims=True))
        a /= a.sum(-1, keepdims=True)
        x = x + (a @ v).transpose(1, 0, 2).reshape(n, H * hd) @ t[p + "self_attn.o_proj.weight"].T
        h = rms(x, t[p + "post_attention_layernorm.weight"])
        g, u = h @ t[p + "mlp.gate_proj.weight"].T, h @ t[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ t[p + "mlp.down_proj.weight"].T
    return rms(x[-1], t["model.norm.weight"]) @ t["lm_head.weight"].T


def test_real_gguf_matches_golden_first_token(smollm):
    """The q/k unpermutation is right only if the loaded weights reproduce transformers' logits."""
    loaded, _ = smollm
    case = json.loads(GOLDEN.read_text())["cases"][0]
    dense = {n: x.dequantize() if isinstance(x, Blocks) else x for n, x in loaded.tensors.items()}
    logits = _first_logits(dense, loaded.spec, case["prompt_ids"])
    top5 = np.argsort(-logits)[:5].tolist()
    assert top5 == case["top5"][0]["ids"]
    np.testing.assert_allclose(logits[top5], case["top5"][0]["logits"], rtol=1e-4)


def test_real_gguf_blocks_are_the_dequantized_weights(smollm):
    """Kept as stored, un-permuted by rows: the same floats the float32 loader made."""
    from gguf import GGMLQuantizationType, GGUFReader
    from gguf.quants import dequantize
    loaded, _ = smollm
    reader = GGUFReader(loaded.source, "r")
    by = {t.name: t for t in reader.tensors}
    for gname, hname, heads in (("blk.3.attn_q.weight", "model.layers.3.self_attn.q_proj.weight", 9),
                                ("blk.3.attn_k.weight", "model.layers.3.self_attn.k_proj.weight", 3),
                                ("blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight", 0),
                                ("token_embd.weight", "model.embed_tokens.weight", 0)):
        t = by[gname]
        want = dequantize(t.data, GGMLQuantizationType(t.tensor_type)).reshape(
            [int(s) for s in reversed(t.shape)])
        if heads:
            want = permute.from_gguf(want, heads)
        got = loaded.tensors[hname]
        assert isinstance(got, Blocks)
        assert np.array_equal(got.dequantize(), want), hname


# ---------------------------------------------------------------- q/k permutation

def test_permutation_exact_small_case():
    # one head, head dim 4, one input column: HF rows [x0 x1 y0 y1] -> GGUF [x0 y0 x1 y1]
    hf = np.array([[0.0], [1.0], [2.0], [3.0]])
    assert permute.to_gguf(hf, 1)[:, 0].tolist() == [0.0, 2.0, 1.0, 3.0]
    assert permute.from_gguf(permute.to_gguf(hf, 1), 1)[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


@pytest.mark.parametrize("n_head,hd,d", [(9, 64, 8), (3, 64, 5), (2, 2, 3), (4, 16, 64)])
def test_permutation_round_trips_both_ways(n_head, hd, d):
    w = np.random.default_rng(n_head * hd).standard_normal((n_head * hd, d)).astype(np.float32)
    back = permute.from_gguf(permute.to_gguf(w, n_head), n_head)
    assert np.array_equal(back, w) and back.flags.c_contiguous
    assert np.array_equal(permute.to_gguf(permute.from_gguf(w, n_head), n_head), w)
    if hd > 2:
        assert not np.array_equal(permute.to_gguf(w, n_head), w)


# ---------------------------------------------------------------- small GGUF files

def write_gguf(path, arch: str, spec, tensors: dict, qtype=None):
    import gguf
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(spec.n_layers)
    w.add_context_length(spec.max_context)
    w.add_embedding_length(spec.d_model)
    w.add_feed_forward_length(spec.d_ff)
    w.add_head_count(spec.n_heads)
    w.add_head_count_kv(spec.n_kv_heads)
    w.add_rope_freq_base(spec.rope_theta)
    w.add_layer_norm_rms_eps(spec.rms_eps)
    w.add_rope_dimension_count(spec.head_dim)
    w.add_token_list([f"t{i}" for i in range(spec.vocab)])
    for name, x in tensors.items():
        if qtype is not None and x.ndim == 2:
            w.add_tensor(name, gguf.quants.quantize(x, qtype), raw_dtype=qtype)
        else:
            w.add_tensor(name, x)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


GGUF_OF = {"input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight":
           "ffn_norm.weight", "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight":
           "attn_k.weight", "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight":
           "attn_output.weight", "self_attn.q_proj.bias": "attn_q.bias", "self_attn.k_proj.bias":
           "attn_k.bias", "self_attn.v_proj.bias": "attn_v.bias", "self_attn.q_norm.weight":
           "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
           "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
           "mlp.down_proj.weight": "ffn_down.weight"}


def as_gguf(spec, hf: dict, permuted: bool) -> dict:
    out = {}
    for name, x in hf.items():
        if name == "lm_head.weight":
            if not spec.tie_embeddings:
                out["output.weight"] = x
            continue
        if name == "model.embed_tokens.weight":
            out["token_embd.weight"] = x
        elif name == "model.norm.weight":
            out["output_norm.weight"] = x
        else:
            _, _, i, rest = name.split(".", 3)
            if permuted and rest == "self_attn.q_proj.weight":
                x = permute.to_gguf(x, spec.n_heads)
            if permuted and rest == "self_attn.k_proj.weight":
                x = permute.to_gguf(x, spec.n_kv_heads)
            out[f"blk.{i}.{GGUF_OF[rest]}"] = x
    return out


def dummy_weights(spec, seed=0) -> dict:
    return {n: dummy_tensor(spec, n, seed) for n in tensor_shapes(spec)}


@pytest.mark.parametrize("shape,permuted", [("tiny", True), ("tiny-qwen2", False), ("tiny-qwen3", False)])
def test_small_gguf_loads_back_to_hf_weights(tmp_path, shape, permuted):
    spec = SHAPES[shape]
    hf = dummy_weights(spec)
    path = tmp_path / f"{shape}.gguf"
    write_gguf(path, spec.arch, spec, as_gguf(spec, hf, permuted))
    loaded = load(str(path), progress=False)
    assert replace(loaded.spec, name="") == replace(spec, name="")
    assert_contract(loaded)
    for name, x in hf.items():
        assert np.array_equal(loaded.tensors[name], x), name


def test_quantized_gguf_dequantizes_near_the_original(tmp_path):
    import gguf
    spec = replace(SHAPES["tiny"], tie_embeddings=False)
    hf = dummy_weights(spec)
    path = tmp_path / "q8.gguf"
    write_gguf(path, "llama", spec, as_gguf(spec, hf, True), qtype=gguf.GGMLQuantizationType.Q8_0)
    loaded = load(str(path), progress=False)
    assert loaded.identity["tensors"]["blk.0.attn_q.weight"]["dtype"] == "Q8_0"
    assert_contract(loaded)
    for name, x in hf.items():   # Q8_0: 8 bits per value with a scale per 32
        got = loaded.tensors[name]
        got = got.dequantize() if isinstance(got, Blocks) else got
        np.testing.assert_allclose(got, x, atol=np.abs(x).max() / 100, err_msg=name)


def test_gguf_of_another_architecture_is_refused_by_name(tmp_path):
    spec = SHAPES["tiny"]
    path = tmp_path / "gemma.gguf"
    write_gguf(path, "gemma2", spec, {"token_embd.weight": np.zeros((spec.vocab, spec.d_model), np.float32)})
    with pytest.raises(UnsupportedModel, match="architecture 'gemma2' is not supported"):
        load(str(path), progress=False)


# ---------------------------------------------------------------- Hugging Face folders

def save_bf16_safetensors(path, tensors: dict[str, np.ndarray]):
    """safetensors' own layout, written by hand: numpy has no bfloat16 to give save_file."""
    header, blobs, offset = {}, [], 0
    for name, x in tensors.items():
        bits = (x.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(x.shape), "data_offsets": [offset, offset + len(bits)]}
        blobs.append(bits)
        offset += len(bits)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(raw)) + raw + b"".join(blobs))


def bf16_round(x):
    return ((x.view(np.uint32) >> 16) << 16).view(np.float32)


HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
    "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "intermediate_size": 128, "vocab_size": 512, "rope_theta": 10000.0, "rms_norm_eps": 1e-5,
    "max_position_embeddings": 512, "tie_word_embeddings": True,
}


def write_hf_folder(folder: Path, config: dict, spec) -> dict:
    """Two shards and an index: layer 0 and the embedding as f32/f16, the rest as bf16."""
    from safetensors.numpy import save_file
    hf = {n: x for n, x in dummy_weights(spec).items() if n != "lm_head.weight" or not spec.tie_embeddings}
    first = {n: x for n, x in hf.items() if n.startswith(("model.embed", "model.layers.0."))}
    first = {n: (x.astype(np.float16) if "mlp" in n else x) for n, x in first.items()}
    second = {n: x for n, x in hf.items() if n not in first}
    save_file(first, str(folder / "model-00001-of-00002.safetensors"))
    save_bf16_safetensors(folder / "model-00002-of-00002.safetensors", second)
    weight_map = {n: "model-00001-of-00002.safetensors" for n in first}
    weight_map.update({n: "model-00002-of-00002.safetensors" for n in second})
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(config))
    expect = {n: x.astype(np.float32) for n, x in first.items()}
    expect.update({n: bf16_round(x) for n, x in second.items()})
    return expect


def test_sharded_hf_folder_with_bf16_loads_what_was_written(tmp_path):
    spec = SHAPES["tiny"]
    expect = write_hf_folder(tmp_path, HF_CONFIG, spec)
    loaded = load(str(tmp_path), progress=False)
    assert replace(loaded.spec, name="") == replace(spec, name="")
    assert_contract(loaded)
    for name, x in expect.items():
        assert np.array_equal(loaded.tensors[name], x), name
    assert loaded.hf_dir == str(tmp_path) and loaded.gguf_path is None
    kinds = {v["dtype"] for v in loaded.identity["tensors"].values()}
    assert kinds == {"F32", "F16", "BF16"}


def test_hf_identity_hash_follows_the_bytes(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    write_hf_folder(a, HF_CONFIG, SHAPES["tiny"])
    write_hf_folder(b, HF_CONFIG, SHAPES["tiny"])
    ha = load(str(a), progress=False).identity["sha256"]
    assert ha == load(str(b), progress=False).identity["sha256"]
    (b / "config.json").write_text(json.dumps({**HF_CONFIG, "rope_theta": 20000.0}))
    assert ha != load(str(b), progress=False).identity["sha256"]


def test_hf_of_another_architecture_is_refused_by_name(tmp_path):
    cfg = {**HF_CONFIG, "architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2"}
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsupportedModel, match="Gemma2ForCausalLM"):
        load(str(tmp_path), progress=False)


def test_hf_missing_tensor_is_named(tmp_path):
    write_hf_folder(tmp_path, {**HF_CONFIG, "num_hidden_layers": 3}, SHAPES["tiny"])
    with pytest.raises(WeightsError, match=r"missing tensor\(s\) model\.layers\.2\."):
        load(str(tmp_path), progress=False)


# ---------------------------------------------------------------- dummy:SHAPE

@pytest.mark.parametrize("shape", ["tiny", "tiny-qwen2", "tiny-qwen3"])
def test_dummy_is_deterministic_and_matches_tensor_shapes(shape):
    a, b = load(f"dummy:{shape}", progress=False), load(f"dummy:{shape}", progress=False)
    assert a.spec == SHAPES[shape] and a.source == f"dummy:{shape}"
    assert_contract(a)
    for name in tensor_shapes(a.spec):
        assert np.array_equal(a.tensors[name], b.tensors[name]), name
        # any tensor alone, in any order, is the same bytes
        assert np.array_equal(dummy_tensor(a.spec, name), a.tensors[name]), name
    assert a.identity == b.identity == dummy_identity(a.spec) and a.identity["seed"] == 0


def test_dummy_values_and_seeds():
    spec = SHAPES["tiny-qwen2"]
    q = dummy_tensor(spec, "model.layers.0.self_attn.q_proj.weight")
    assert abs(q.std() - 0.02) < 0.002 and abs(q.mean()) < 0.002
    norm = dummy_tensor(spec, "model.layers.1.input_layernorm.weight")
    assert abs(norm.mean() - 1.0) < 0.01
    bias = dummy_tensor(spec, "model.layers.0.self_attn.k_proj.bias")
    assert np.abs(bias).max() < 0.1
    assert not np.array_equal(q, dummy_tensor(spec, "model.layers.1.self_attn.q_proj.weight"))
    assert not np.array_equal(q, dummy_tensor(spec, "model.layers.0.self_attn.q_proj.weight", seed=1))
    seeded = load("dummy:tiny-qwen2:1", progress=False)
    assert seeded.identity["sha256"] != load("dummy:tiny-qwen2", progress=False).identity["sha256"]
    assert dummy_tensor(spec, "model.norm.weight", dtype=np.float16).dtype == np.float16


def test_big_dummy_is_planned_not_materialized(monkeypatch):
    spec = SHAPES["llama3-8b"]
    shapes = tensor_shapes(spec)
    assert shapes["model.layers.31.self_attn.k_proj.weight"] == (1024, 4096)
    assert 8.0e9 < n_floats(spec) < 8.1e9
    monkeypatch.setattr(dummy_mod, "available_memory", lambda: 64 << 30)
    with pytest.raises(WeightsError, match=r"dummy:llama3-8b: float32 weights need 29\.9 GiB"):
        load("dummy:llama3-8b", progress=False)
    # one tensor at a time is always allowed
    assert dummy_tensor(spec, "model.layers.0.self_attn.k_proj.weight").shape == (1024, 4096)


# ---------------------------------------------------------------- the front door

@pytest.mark.parametrize("model,match", [
    ("dummy:nope", "unknown dummy shape 'nope'"),
    ("/no/such/model.gguf", "'/no/such/model.gguf' does not exist"),
    ("", "got ''"),
])
def test_bad_model_arguments_are_named(model, match):
    with pytest.raises(ValueError, match=match):
        load(model, progress=False)


def test_a_plain_file_is_refused(tmp_path):
    p = tmp_path / "weights.bin"
    p.write_bytes(b"\0" * 16)
    with pytest.raises(WeightsError, match="neither a .gguf file nor a Hugging Face folder"):
        load(str(p))


def test_quick_load_logs_and_draws_no_bar(capsys, caplog):
    with caplog.at_level(logging.INFO, logger="foldserve"):
        loaded = load("dummy:tiny")
    assert "loaded dummy:tiny in" in caplog.text and loaded.load_seconds < 1.0
    assert capsys.readouterr().err == ""


# ---------------------------------------------------------------- Llama 3.1 rope scaling

def test_llama3_rope_scaling_is_recovered_from_rope_freqs(tmp_path):
    from server.engine.weights.rope_scaling import llama3_divisors
    spec = replace(SHAPES["tiny"], rope_theta=500000.0, rope_scaling=(8.0, 1.0, 4.0, 8192))
    tensors = as_gguf(spec, dummy_weights(spec), True)
    tensors["rope_freqs.weight"] = llama3_divisors(spec.head_dim, spec.rope_theta,
                                                   spec.rope_scaling).astype(np.float32)
    write_gguf(tmp_path / "l3.gguf", "llama", spec, tensors)
    loaded = load(str(tmp_path / "l3.gguf"), progress=False)
    assert loaded.spec.rope_scaling == (8.0, 1.0, 4.0, 8192)
    assert "rope_freqs.weight" not in loaded.tensors


def test_llama3_rope_scaling_from_hf_config(tmp_path):
    cfg = {**HF_CONFIG, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                         "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
    write_hf_folder(tmp_path, cfg, SHAPES["tiny"])
    assert load(str(tmp_path), progress=False).spec.rope_scaling == (8.0, 1.0, 4.0, 8192)
    (tmp_path / "config.json").write_text(json.dumps({**HF_CONFIG, "rope_scaling": {"type": "yarn", "factor": 4}}))
    with pytest.raises(WeightsError, match="rope_scaling type 'yarn' is not supported"):
        load(str(tmp_path), progress=False)
