"""Kimi-Linear (kimilinear: KDA layers, NoPE latent attention, the DeepSeek-V3 MoE): one
recurrence order through the engine (rounds of every size, interleaved with other streams);
the KV layout (latent rows on the full layers' pages, the KDA states as the fixed part,
counted by the planner and split by heads); solo == concurrent, paged == window (TP=2
== TP=1: tests/ranks/test_kimi_linear_tp.py); the refusals by name; the tiny HF checkpoint held to its transformers references
(tests/data/kimi_linear/, made by tools/refs/record_kimi_linear.py) under the golden rule.
The scaffolding is tests/model/recurrent_checks.py's."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from server.engine.engine import Engine
from server.ranks.steps import PoolStep
from server.shapes.spec import UnsupportedModel, shape

from . import recurrent_checks as rc
from .test_moe_engine import engine_of

NAME = "tiny-kimilinear"
DATA = Path(__file__).resolve().parents[1] / "data" / "kimi_linear" / "kimi-linear-tiny.json"


def record():
    return rc.record(DATA)


@pytest.fixture(scope="module")
def eng():
    return engine_of(f"dummy:{NAME}")


def test_prefill_rounds_of_every_size_equal(eng):
    """A prompt of 130 tokens in one round, in rounds of every size 2..128 and in uneven
    rounds ends in the same state bytes and last logits; every round's last row equals the
    one-token-a-round run's row at that position."""
    tok_rows, tok_state = rc.assert_rounds_of_every_size_equal(eng)
    assert any(np.frombuffer(tok_state, np.float32))


def test_interleaved_with_other_streams(eng):
    """Stream 0's prompt in rounds of 3 beside stream 1's rounds == stream 0 alone."""
    rc.assert_interleaved_equals_alone(eng)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent(eng, paged):
    rc.assert_solo_equals_concurrent(eng, paged)


def test_paged_equals_window(eng):
    rc.assert_paged_equals_window(eng)


def test_check_pages(eng):
    rc.assert_check_pages(eng)


def test_fixed_part_in_the_layout_and_the_plan():
    """Latent rows on the one full layer only; the fixed part (3 KDA layers' state [2, 16, 16]
    and conv window [3, 96], float32) counted a stream by the planner, split by heads."""
    from server.planner.layout import layouts
    spec = shape(NAME)
    fixed1 = 3 * (2 * 16 * 16 + 3 * 3 * 2 * 16) * 4
    for tp in (1, 2):
        engines = [engine_of(f"dummy:{NAME}", tp=tp, rank=r) for r in range(tp)]
        Ls = layouts(spec, tp, 4, 16)
        for e, L in zip(engines, Ls):
            ks = e.kv_spec
            assert ks.kind == "latent" and ks.n_layers == 1 and ks.n_fixed_layers == 3
            assert e.bytes_per_token == 1 * (32 + 8) * 4 == L.bytes_per_token   # replicated
            assert ks.fixed_bytes == fixed1 // tp == L.kv_spec.fixed_bytes
        assert "latent rows on 1 layers" in Ls[0].kv_spec.describe()
    e = engine_of(f"dummy:{NAME}")
    e.apply(PoolStep(True, 8, 16, (e.page_bytes(16),), 3, 128))
    assert e.kv.nbytes == 8 * e.page_bytes(16) + 3 * fixed1
    big = shape("kimi-linear-48b-a3b")
    assert big.n_kv_layers == 7 and [i for i in range(27) if not big.is_linear_layer(i)] == \
        [3, 7, 11, 15, 19, 23, 26]
    # the line docs/architecture.md quotes: 20 KDA layers of 16 heads (of 32) at TP=2
    assert "latent rows on 7 layers; recurrent states of 20 layers beside the pages, 21.41 MiB " \
        "fixed each stream" in layouts(big, 2, 4, 16)[0].kv_spec.describe()
    assert layouts(big, 2, 4, 16)[0].kv_spec.fixed_bytes == 20 * (16 * 128 * 128 + 3 * 3 * 16 * 128) * 4


def test_guards(eng):
    """A chunk that does not start where its stream's state stands, and a stream begun on a
    kept prefix without its snapshot restored, are refused by name."""
    rc.assert_guards(eng)


def test_gpu_refused_by_name():
    """--device cuda: the dummy shape, the HF folder and the GGUF, each before any GPU."""
    from server.engine.build import open_model
    from tools.refs import kimi_checkpoint as kc
    with pytest.raises(UnsupportedModel, match="kimilinear.*Kimi Delta Attention.*CPU only"):
        open_model(f"dummy:{NAME}", device="cuda", progress=False)
    for src in (kc.build_once()[0], kc.build_gguf_once()[0]):
        with pytest.raises(UnsupportedModel, match="kimilinear.*CPU only"):
            open_model(str(src), device="cuda", progress=False)


def test_hf_config_reading_and_refusals():
    from server.engine.weights.hf_config import spec_from_config
    cfg = dict(record()["checkpoint"]["config"])
    s = spec_from_config(cfg, "x/config.json")
    assert (s.arch, s.linear_layers, s.lin_k_heads, s.lin_k_dim, s.first_dense_layers,
            s.n_group, s.kv_lora_rank, s.q_lora_rank, s.lin_lower_bound) == \
        ("kimilinear", (0, 1, 2, 4, 5, 6), 4, 16, 1, 2, 32, 0, None)
    # Moonshot's own config: linear_attn_config with 1-indexed layers, first_k_dense_replace
    moon = {k: v for k, v in cfg.items() if k not in ("layer_types", "mlp_layer_types",
                                                      "linear_head_dim", "linear_num_heads")}
    moon.update(linear_attn_config={"full_attn_layers": [4, 8], "kda_layers": [1, 2, 3, 5, 6, 7],
                                    "head_dim": 16, "num_heads": 4},
                first_k_dense_replace=1)
    m = spec_from_config(moon, "x/config.json")
    assert (m.linear_layers, m.lin_k_heads, m.first_dense_layers) == ((0, 1, 2, 4, 5, 6), 4, 1)
    for key, val in (("hidden_act", "gelu"), ("attention_bias", True),
                     ("layer_types", ["linear_attention"] * 8),
                     ("mlp_layer_types", ["sparse", "dense"] + ["sparse"] * 6),
                     ("linear_attn_config", {"safe_gate": True})):
        with pytest.raises(UnsupportedModel, match=key):
            spec_from_config({**cfg, key: val}, "x/config.json")


# ---------------------------------------------------------------- the HF checkpoint
@pytest.fixture(scope="module")
def ckpt():
    from server.engine.weights import load
    from tools.refs import kimi_checkpoint as kc
    rec = record()
    return rec, load(str(rc.built_as_recorded(kc.build_once, rec)), progress=False)


def test_checkpoint_matches_transformers(ckpt):
    """The golden rule: greedy ids equal through exact_prefix, the first step's top-5
    logits within 1e-4 relative of transformers float32."""
    rec, ld = ckpt
    assert rec["hf_check"]["loading_problems"] == {}
    rc.assert_golden_rule(Engine(ld.spec, ld.tensors.__getitem__), rec)


def test_checkpoint_prefill_equals_decode(ckpt):
    """The checkpoint's longest prompt: one round == token by token, byte for byte."""
    rec, ld = ckpt
    rc.assert_prefill_equals_decode(Engine(ld.spec, ld.tensors.__getitem__), rec)


# ---------------------------------------------------------------- the GGUF
@pytest.fixture(scope="module")
def gguf_ld():
    from server.engine.weights import load
    from tools.refs import kimi_checkpoint as kc
    rec = record()
    path, sha = kc.build_gguf_once()
    assert sha == rec["gguf"]["sha256"]            # the file llama.cpp's ids were taken on
    return rec, load(str(path), progress=False)


def test_gguf_spec_is_the_folders(ckpt, gguf_ld):
    """GGUF kimi-linear (head_count_kv 0 on the KDA layers, kda.head_dim, ssm.conv_kernel,
    the MLA and MoE keys) reads as the HF folder's spec, field for field but the name."""
    from dataclasses import replace
    (_, ld), (_, g) = ckpt, gguf_ld
    assert replace(g.spec, name="", rope_theta=0.0) == replace(ld.spec, name="", rope_theta=0.0)


def test_gguf_matches_transformers_and_llama_cpp(gguf_ld):
    """The golden rule on the GGUF: greedy ids equal transformers' through exact_prefix, and
    llama.cpp's on the same file (recorded: they followed transformers' for every step), the
    first step's top-5 logits within 1e-4 relative of transformers'."""
    rec, ld = gguf_ld
    llama = {c["name"]: c for c in rec["gguf"]["llama_cpp"]["cases"]}
    rc.assert_golden_rule(Engine(ld.spec, ld.tensors.__getitem__), rec, llama=llama)


def test_q8_0_kda_projections_stay_blocks(tmp_path):
    """The GGUF's Q8_0 copy: KDA's q | k | v as the file's blocks == their float32 values
    within reordering, byte-equal across rounds (recurrent_checks)."""
    from tools.refs import kimi_checkpoint as kc
    rc.assert_kda_blocks_equal_their_floats(
        *rc.q8_0_engines(kc.build_gguf_once()[0], tmp_path / "kimi-linear-tiny-Q8_0.gguf"))


def test_gguf_refusals(gguf_ld):
    """A kimi-linear GGUF whose head_count_kv is not an array a layer, or whose experts are not
    gated by sigmoid, is refused naming the key."""
    from server.engine.weights.gguf_file import GGUFFile
    from server.engine.weights.gguf_spec import Fields, spec_from_gguf
    from tools.refs import kimi_checkpoint as kc
    from .test_mla_engine import _Field
    r = GGUFFile(str(kc.build_gguf_once()[0]))
    kv = {k: f.contents() for k, f in r.fields.items() if not k.startswith("tokenizer.")}
    kv["tokenizer.ggml.tokens"] = ["x"] * 512
    names = {t.name for t in r.tensors}

    def meta(**over):
        d = {**kv, **over}
        return Fields(type("R", (), {"fields": {k: _Field(v) for k, v in d.items()}})(), "x.gguf")
    spec, _ = spec_from_gguf(meta(), names)
    assert spec.linear_layers == (0, 1, 2, 4, 5, 6)
    with pytest.raises(Exception, match="head_count_kv"):
        spec_from_gguf(meta(**{"kimi-linear.attention.head_count_kv": 1}), names)
    with pytest.raises(UnsupportedModel, match="expert_gating_func"):
        spec_from_gguf(meta(**{"kimi-linear.expert_gating_func": 1}), names)
