"""Multi-head latent attention (deepseek2) at the engine: the KV layout's latent rows (bytes
a token the same on every rank, equal to the planner's), solo == concurrent, paged ==
window (the seed's paged check: page edges, scattered NaN-poisoned pages), resumed == fresh;
the tiny DeepseekV3 checkpoint (tools/refs/moe_checkpoint.py) read from its HF folder and its
GGUF alike; llama.cpp's gating rule for a file without the key; the GPU refused by name."""
from __future__ import annotations

import io
import logging

import numpy as np
import pytest

from server.engine.engine import Engine
from server.engine.probe import solo_vs_concurrent
from server.engine.weights import load
from server.shapes.spec import UnsupportedModel, shape

from .test_moe_engine import PROMPT, engine_of, greedy

NAME = "tiny-deepseek3"


def test_latent_rows_are_the_kv_layout_on_every_rank():
    from server.planner.layout import layouts
    spec = shape(NAME)
    width = spec.kv_lora_rank + spec.qk_rope_head_dim
    for tp in (1, 2, 3):
        engines = [engine_of(f"dummy:{NAME}", tp=tp, rank=r) for r in range(tp)]
        for eng, L in zip(engines, layouts(spec, tp, 4, 16)):
            assert eng.kv_spec.kind == "latent"
            assert eng.bytes_per_token == spec.n_layers * width * 4 == L.bytes_per_token
        assert sum(e.weights.nq for e in engines) == spec.n_heads      # heads split
    eng = engine_of(f"dummy:{NAME}")
    from server.ranks.steps import PoolStep
    eng.apply(PoolStep(True, 4, 16, (eng.page_bytes(16),), 1, 64))
    assert eng.kv.K.shape == (spec.n_layers, 4, 16, 1, width) and eng.kv.V is None
    assert eng.kv.nbytes == 4 * eng.page_bytes(16)


def test_mha_bytes_unchanged():
    """The llama and MoE families' bytes a token: 2 * n_kv * head_dim a layer, as before."""
    for name in ("tiny", "tiny-qwen3moe", "tiny-glm4moe", "llama3-8b"):
        spec = shape(name)
        from server.shapes.kv_layout import kv_spec
        from server.shapes.shard import shard_of
        for tp in (1, 2):
            sh = shard_of(spec, tp, 0)
            assert kv_spec(spec, sh).bytes_per_token(2) == spec.n_layers * 2 * sh.n_kv * spec.head_dim * 2


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent(paged):
    r = solo_vs_concurrent(engine_of(f"dummy:{NAME}"), paged=paged, context=128)
    assert r["equal_steps"] == r["steps"], r


def test_resumed_equals_fresh_and_paged_equals_window():
    eng = engine_of(f"dummy:{NAME}")
    whole = greedy(eng, [PROMPT])
    assert greedy(eng, [PROMPT[:7], PROMPT[7:13], PROMPT[13:]]) == whole
    assert greedy(eng, [PROMPT[:1], PROMPT[1:2], PROMPT[2:]]) == whole
    assert greedy(eng, [PROMPT], paged=False) == whole
    assert greedy(eng, [PROMPT], page_rows=4) == whole


@pytest.mark.parametrize("tp", [1, 2, 3])
def test_check_pages(tp):
    """The seed's paged check on this family: every prompt byte-equal to its window twin,
    every page free at the end (TP>1: rank 0's shard alone, heads split, no all-reduce: the
    check compares a shard's own two forms)."""
    from server.check_pages import run_check
    eng = engine_of(f"dummy:{NAME}", tp=tp, rank=tp - 1)
    out = io.StringIO()
    assert run_check(eng, page_rows=8, prefill_chunk=16, decode=4, out=out) == 0, out.getvalue()
    assert out.getvalue().count("equal;") >= 5


def test_the_absorbed_form_equals_the_textbook_form():
    """kernels/mla.py against the unabsorbed definition (k_nope = W_UK c, v = W_UV c, per
    head softmax over q_nope.k_nope + q_pe.k_pe) on random rows: the same numbers."""
    from types import SimpleNamespace
    from kernels import mla
    rng = np.random.default_rng(0)
    T, H, N, R, C, V = 7, 3, 16, 8, 32, 16
    q = rng.standard_normal((T, H, N + R), dtype=np.float32)
    ckv = rng.standard_normal((T, C + R), dtype=np.float32)
    norm = (1 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    kv_b = rng.standard_normal((H, N + V, C), dtype=np.float32) / 6
    inv = (1.0 / 10000 ** (np.arange(0, R, 2) / R)).astype(np.float32)
    pos = np.arange(T, dtype=np.int32)
    pool = np.full((3, 4, 1, C + R), np.nan, np.float32)
    chunk = SimpleNamespace(table=(2, 0), page_rows=4, start=0)
    rows = SimpleNamespace(pos=pos, spans=[(0, T)], chunks=[chunk])
    got = mla.round_attend(q, ckv, norm, 1e-6, np.ascontiguousarray(kv_b[:, :N]),
                           np.ascontiguousarray(kv_b[:, N:].transpose(0, 2, 1)), N, pool, rows,
                           inv, 0.2).reshape(T, H, V)
    lat = mla.latent_rows(ckv, norm, 1e-6, C, pos, inv)
    c, kpe = lat[:, 0, :C].astype(np.float64), lat[:, 0, C:].astype(np.float64)
    qpe = mla.rope_interleaved(q[:, :, N:], pos, inv).astype(np.float64)
    for h in range(H):
        k_nope = c @ kv_b[h, :N].T.astype(np.float64)
        v = c @ kv_b[h, N:].T.astype(np.float64)
        s = (q[:, h, :N].astype(np.float64) @ k_nope.T + qpe[:, h] @ kpe.T) * 0.2
        s = np.where(np.tril(np.ones((T, T), bool)), s, -np.inf)
        w = np.exp(s - s.max(1, keepdims=True))
        w /= w.sum(1, keepdims=True)
        np.testing.assert_allclose(got[:, h], w @ v, rtol=2e-4, atol=2e-5)


@pytest.fixture(scope="module")
def built():
    from tools.refs import moe_checkpoint as mc
    return mc.build_once("deepseek3-tiny")


def test_checkpoint_hf_and_gguf_read_alike(built):
    hf = load(str(built.hf_dir), progress=False)
    gg = load(str(built.gguf["F32"]), progress=False)
    s = hf.spec
    assert (s.arch, s.n_heads, s.head_dim, s.kv_lora_rank, s.qk_rope_head_dim, s.v_head_dim,
            s.q_lora_rank, s.router, s.n_group, s.topk_group, s.first_dense_layers) == \
        ("deepseek2", 4, 24, 32, 8, 16, 48, "sigmoid", 4, 2, 1)
    for f in ("n_layers", "head_dim", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim", "q_lora_rank",
              "router", "norm_topk_prob", "routed_scaling_factor", "n_group", "topk_group",
              "n_experts", "n_experts_used", "expert_ff", "shared_ff", "first_dense_layers", "rot"):
        assert getattr(gg.spec, f) == getattr(s, f), f
    np.testing.assert_array_equal(hf.tensors["model.layers.2.self_attn.kv_b_proj.weight"],
                                  gg.tensors["model.layers.2.self_attn.kv_b_proj.weight"])
    a = greedy(Engine(s, hf.tensors.__getitem__), [PROMPT])
    b = greedy(Engine(gg.spec, gg.tensors.__getitem__), [PROMPT])
    assert a[1] == b[1]
    for x, y in zip(a[0], b[0]):         # the experts' sums in the block kernels' order
        np.testing.assert_allclose(np.frombuffer(x, np.float32), np.frombuffer(y, np.float32),
                                   rtol=1e-4, atol=1e-5)


def test_q8_0_solo_equals_concurrent(built):
    ld = load(str(built.gguf["Q8_0"]), progress=False)
    r = solo_vs_concurrent(Engine(ld.spec, ld.tensors.__getitem__), paged=True, context=128)
    assert r["equal_steps"] == r["steps"], r


class _Field:
    def __init__(self, v):
        self.v = v
        self.data = v if isinstance(v, list) else [v]

    def contents(self):
        return self.v


def _fields(drop=(), **over):
    from server.engine.weights.gguf_spec import Fields
    a = "deepseek2"
    kv = {"general.architecture": a, f"{a}.embedding_length": 64, f"{a}.attention.head_count": 4,
          f"{a}.attention.head_count_kv": 1, f"{a}.block_count": 3, f"{a}.vocab_size": 512,
          f"{a}.attention.key_length": 40, f"{a}.attention.value_length": 32,
          f"{a}.attention.key_length_mla": 24, f"{a}.attention.value_length_mla": 16,
          f"{a}.attention.kv_lora_rank": 32, f"{a}.attention.q_lora_rank": 48,
          f"{a}.rope.dimension_count": 8, f"{a}.expert_count": 8, f"{a}.expert_used_count": 2,
          f"{a}.expert_feed_forward_length": 32, f"{a}.feed_forward_length": 128,
          f"{a}.leading_dense_block_count": 1, f"{a}.expert_gating_func": 2}
    kv.update({f"{a}.{k}": v for k, v in over.items()})
    for k in drop:
        kv.pop(f"{a}.{k}")
    return Fields(type("R", (), {"fields": {k: _Field(v) for k, v in kv.items()}})(), "x.gguf")


def test_gguf_gating_rule():
    from server.engine.weights.gguf_spec import spec_from_gguf
    assert spec_from_gguf(_fields(), set())[0].router == "sigmoid"
    # llama.cpp: a deepseek2 file without expert_gating_func (DeepSeek-V2/V2.5) is softmax
    assert spec_from_gguf(_fields(drop=("expert_gating_func",)), set())[0].router == "softmax"
    # ... but GLM-4.7-Flash's shape (47 or 48 blocks with the NextN one, 154,880 tokens) is sigmoid
    for blocks, nextn in ((47, 0), (48, 1)):
        glm = _fields(drop=("expert_gating_func",), block_count=blocks, vocab_size=154880,
                      nextn_predict_layers=nextn)
        assert spec_from_gguf(glm, set())[0].router == "sigmoid", blocks
    for blocks, vocab in ((46, 154880), (47, 154881), (49, 154880)):
        other = _fields(drop=("expert_gating_func",), block_count=blocks, vocab_size=vocab)
        assert spec_from_gguf(other, set())[0].router == "softmax", (blocks, vocab)
    # the key, where present, wins over the shape
    glm1 = _fields(expert_gating_func=1, block_count=47, vocab_size=154880)
    assert spec_from_gguf(glm1, set())[0].router == "softmax"
    s = spec_from_gguf(_fields(drop=("attention.q_lora_rank",)), set())[0]
    assert s.q_lora_rank == 0 and s.head_dim == 24 and s.n_kv_heads == 4
    with pytest.raises(UnsupportedModel, match=r"deepseek2\.attention\.sliding_window"):
        spec_from_gguf(_fields(**{"attention.sliding_window": 4}), set())


def test_plain_q_without_q_lora():
    from dataclasses import replace
    from server.engine.weights.dummy import dummy_tensor
    spec = replace(shape(NAME), q_lora_rank=0, name="plain-q")
    eng = Engine(spec, lambda n: dummy_tensor(spec, n, 0))
    assert eng.weights.layers[0].wq_a is None
    r = solo_vs_concurrent(eng, paged=True, context=64)
    assert r["equal_steps"] == r["steps"], r


def test_cuda_is_refused_by_name():
    from server.engine.build import open_model
    with pytest.raises(UnsupportedModel) as e:
        open_model(f"dummy:{NAME}", device="cuda", progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "multi-head latent attention" in msg and "--device cpu" in msg


def test_mtp_counted_not_run_in_hf(built, tmp_path, caplog):
    """A DeepseekV3 folder with num_nextn_predict_layers 1 and its layer's tensors: loaded
    without them, one startup line."""
    import json
    import shutil
    from safetensors.numpy import load_file, save_file
    d = tmp_path / "mtp"
    shutil.copytree(built.hf_dir, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg["num_nextn_predict_layers"] = 1
    (d / "config.json").write_text(json.dumps(cfg))
    t = load_file(str(d / "model.safetensors"))
    t["model.layers.3.enorm.weight"] = np.ones(64, np.float32)
    t["model.layers.3.self_attn.kv_b_proj.weight"] = t["model.layers.2.self_attn.kv_b_proj.weight"]
    save_file(t, str(d / "model.safetensors"))
    with caplog.at_level(logging.INFO, logger="foldserve"):
        ld = load(str(d), progress=False)
    assert ld.spec.nextn_layers == 1 and ld.spec.n_layers == 3
    assert "MTP/NextN layer(s) 3 (2 tensors) not run" in caplog.text


@pytest.mark.parametrize("name,tp", [("deepseek3-tiny", 1), ("glm47flash-tiny", 1),
                                     ("glm47flash-tiny", 2), ("glm47flash-tiny", 3),
                                     ("deepseek2lite-tiny", 1), ("deepseek2lite-tiny", 2),
                                     ("deepseek2lite-tiny", 3)])
def test_check_pages_on_the_checkpoints(name, tp):
    """The seed's paged check on the recorded checkpoints' Q8_0 GGUFs (the files the
    references were made on, tools/refs/moe_checkpoint.py): prompts at and past the page
    edges, every page NaN-poisoned, a second stream scattering the table, first token, its
    logits and 4 decode rows byte-equal to the whole-window twin, every page free at the end;
    TP>1: the last rank's shard (heads split, the latent replicated). deepseek3-tiny's expert
    width is one Q8_0 block (32), which TP does not split: TP=1 alone."""
    from server.check_pages import run_check
    from tools.refs import moe_checkpoint as mc
    ld = load(str(mc.build_once(name).gguf["Q8_0"]), progress=False)
    eng = Engine(ld.spec, ld.tensors.__getitem__, tp=tp, rank=tp - 1)
    assert eng.kv_spec.kind == "latent"
    out = io.StringIO()
    assert run_check(eng, page_rows=8, prefill_chunk=16, decode=4, out=out) == 0, out.getvalue()
    assert out.getvalue().count("equal;") >= 5


def test_deepseek_v2_checkpoint_softmax_by_llama_cpp_rule():
    """The DeepSeek-V2-Lite-shaped checkpoint: its GGUF has no expert_gating_func (the
    converter writes none for a config without scoring_func) and is read as softmax by
    llama.cpp's rule, as its HF folder (DeepseekV2ForCausalLM) is; a plain q (no q_lora), no
    selection bias, weights not renormalised."""
    from server.engine.weights.gguf_file import GGUFFile
    from tools.refs import moe_checkpoint as mc
    b = mc.build_once("deepseek2lite-tiny")
    keys = GGUFFile(str(b.gguf["F32"])).fields        # every key (GGUFReader's: test_gguf_header)
    assert "deepseek2.expert_gating_func" not in keys
    hf = load(str(b.hf_dir), progress=False)
    gg = load(str(b.gguf["F32"]), progress=False)
    for s in (hf.spec, gg.spec):
        assert (s.router, s.q_lora_rank, s.norm_topk_prob, s.n_shared_experts) == ("softmax", 0, False, 2)
    assert "model.layers.1.mlp.gate.e_score_correction_bias" not in hf.tensors


def test_deepseek_v2_settings_refused_by_name(tmp_path):
    import json
    import shutil
    from tools.refs import moe_checkpoint as mc
    b = mc.build_once("deepseek2lite-tiny")
    for key, value in (("topk_method", "group_limited_greedy"), ("scoring_func", "sigmoid")):
        d = tmp_path / key
        shutil.copytree(b.hf_dir, d)
        cfg = json.loads((d / "config.json").read_text())
        cfg[key] = value
        cfg["n_group"] = 2
        (d / "config.json").write_text(json.dumps(cfg))
        with pytest.raises(UnsupportedModel, match=key):
            load(str(d), progress=False)
