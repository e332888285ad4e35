"""Mixture-of-experts families at the engine, on tiny checkpoints (tests/model/moe_files.py):
solo == concurrent, paged == window, resumed == fresh (a prompt prefilled in pieces equals it
whole); a GGUF's experts kept as stored (Q8_0 blocks, F32 rows) and its forward; the HF
folder (per-expert or fused expert tensors) equal to the dummy model byte for byte; the MTP
block counted and not run; unknown keys and the GPU refused by name."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from server.engine.engine import Engine
from server.engine.probe import solo_vs_concurrent
from server.engine.weights import load
from kernels.blocks import Blocks
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
from server.shapes.spec import UnsupportedModel, shape

from .moe_files import write_gguf, write_hf

FAMILIES = ["tiny-qwen3moe", "tiny-glm4moe"]
PROMPT = (5, 17, 99, 3, 250, 41, 7, 7, 300, 12, 64, 128, 9, 33, 411, 2, 18, 77, 150, 6)


def engine_of(model: str, **kw) -> Engine:
    ld = load(model, progress=False)
    return Engine(ld.spec, ld.tensors.__getitem__, **kw)


def greedy(eng, chunks_of_prompt, steps=6, paged=True, context=128, page_rows=16):
    """Prefill the prompt in the given pieces, then greedy decode: (logits rows, ids)."""
    per = context // page_rows
    eng.apply(PoolStep(paged, per if paged else 0, page_rows, (eng.page_bytes(page_rows),), 1, context))
    eng.apply(BeginStep(0, tuple(range(per)) if paged else ()))
    start, lg = 0, None
    for piece in chunks_of_prompt:
        lg = eng.apply(RoundStep((Chunk(0, start, tuple(piece), True),)))
        start += len(piece)
    rows, ids = [], []
    for _ in range(steps):
        row = np.asarray(lg[0], np.float32)
        rows.append(row.tobytes())
        ids.append(int(np.argmax(row)))
        lg = eng.apply(RoundStep((Chunk(0, start, (ids[-1],), True),)))
        start += 1
    eng.apply(EndStep(0))
    return rows, ids


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
@pytest.mark.parametrize("name", FAMILIES)
def test_solo_equals_concurrent(name, paged):
    eng = engine_of(f"dummy:{name}")
    r = solo_vs_concurrent(eng, paged=paged, context=128)
    assert r["equal_steps"] == r["steps"], r


@pytest.mark.parametrize("name", FAMILIES)
def test_resumed_equals_fresh_and_paged_equals_window(name):
    eng = engine_of(f"dummy:{name}")
    whole = greedy(eng, [PROMPT])
    assert greedy(eng, [PROMPT[:7], PROMPT[7:13], PROMPT[13:]]) == whole
    assert greedy(eng, [PROMPT], paged=False) == whole


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("moe")
    out = {}
    for name in FAMILIES:
        spec = shape(name)
        out[name, "F32"] = write_gguf(d / f"{name}-f32.gguf", spec, "F32")
        out[name, "Q8_0"] = write_gguf(d / f"{name}-q8_0.gguf", spec, "Q8_0")
        out[name, "hf"] = write_hf(d / f"{name}-hf", spec)
        out[name, "hf-fused"] = write_hf(d / f"{name}-hf-fused", spec, fused_experts=True)
    return out


@pytest.mark.parametrize("name", FAMILIES)
def test_hf_folder_is_the_dummy_model(files, name):
    want = greedy(engine_of(f"dummy:{name}"), [PROMPT])
    for form in ("hf", "hf-fused"):
        ld = load(str(files[name, form]), progress=False)
        assert ld.spec.n_experts == shape(name).n_experts and ld.spec.rot == shape(name).rot
        assert greedy(Engine(ld.spec, ld.tensors.__getitem__), [PROMPT]) == want, form


@pytest.mark.parametrize("name", FAMILIES)
def test_gguf_f32_spec_and_forward(files, name):
    ld = load(str(files[name, "F32"]), progress=False)
    s, want = ld.spec, shape(name)
    for f in ("n_layers", "n_experts", "n_experts_used", "expert_ff", "n_shared_experts", "shared_ff",
              "first_dense_layers", "router", "norm_topk_prob", "routed_scaling_factor", "n_group",
              "topk_group", "rot", "qkv_bias", "qk_norm", "head_dim"):
        assert getattr(s, f) == getattr(want, f), f
    ex = ld.tensors["model.layers.1.mlp.experts.3.down_proj.weight"]
    assert isinstance(ex, Blocks) and ex.kind == "F32"       # rows as stored, read by numba
    rows, ids = greedy(Engine(s, ld.tensors.__getitem__), [PROMPT])
    ref_rows, ref_ids = greedy(engine_of(f"dummy:{name}"), [PROMPT])
    # the same weights; the experts' sums run in the block kernels' order, not OpenBLAS's
    for a, b in zip(rows, ref_rows):
        np.testing.assert_allclose(np.frombuffer(a, np.float32), np.frombuffer(b, np.float32),
                                   rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("name", FAMILIES)
def test_gguf_q8_0_experts_stay_blocks(files, name):
    ld = load(str(files[name, "Q8_0"]), progress=False)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    L = eng.weights.layers[-1]
    # gate|up: each expert's as two parts (kernels.blocks.ExpertGateUp: the file's stacks in place)
    gu = [p for w in L.experts_gu for p in (w if isinstance(w, list) else [w])]
    assert all(isinstance(w, Blocks) and w.kind == "Q8_0" for w in gu + list(L.experts_down))
    assert len(gu) == 2 * len(L.experts_down)
    assert L.experts_gu[0].nbytes == 2 * shape(name).expert_ff * shape(name).d_model // 32 * 34
    r = solo_vs_concurrent(eng, paged=True, context=128)
    assert r["equal_steps"] == r["steps"], r
    # within Q8_0's error of the float model: the same first greedy token
    assert greedy(eng, [PROMPT], steps=1)[1] == greedy(engine_of(f"dummy:{name}"), [PROMPT], steps=1)[1]


def test_glm_mtp_block_is_counted_not_run(tmp_path, caplog):
    spec = shape("tiny-glm4moe")
    path = write_gguf(tmp_path / "mtp.gguf", spec, "F32", mtp=True)
    with caplog.at_level(logging.INFO, logger="foldserve"):
        ld = load(str(path), progress=False)
    assert ld.spec.n_layers == spec.n_layers and ld.spec.nextn_layers == 1
    assert not any(k.startswith(f"model.layers.{spec.n_layers}.") for k in ld.tensors)
    assert "MTP/NextN block blk.3 (3 tensors" in caplog.text and "not run" in caplog.text


def test_unknown_key_is_refused_by_name(tmp_path):
    path = write_gguf(tmp_path / "k.gguf", shape("tiny-qwen3moe"), "F32",
                      extra={"qwen3moe.expert_chunk_size": 4})
    with pytest.raises(UnsupportedModel, match=r"qwen3moe\.expert_chunk_size.*qwen3moe family"):
        load(str(path), progress=False)


def test_unknown_arch_names_what_we_serve():
    from server.shapes.spec import check_arch
    with pytest.raises(UnsupportedModel, match=r"'kimi_linear'.*qwen3moe, glm4moe, deepseek2"):
        check_arch("kimi_linear")


def test_cuda_is_refused_in_one_line():
    from server.engine.build import open_model
    with pytest.raises(UnsupportedModel) as e:
        open_model("dummy:tiny-glm4moe", device="cuda", progress=False)
    msg = str(e.value)
    assert "\n" not in msg and "glm4moe family (mixture of experts)" in msg and "--device cpu" in msg


@pytest.mark.parametrize("x_form", ["auto", "float"])
@pytest.mark.parametrize("name", FAMILIES)
def test_grouped_experts_give_the_loops_bytes(files, name, x_form, monkeypatch):
    """kernels/moe_cpu.py's one region for all experts == one product an expert, byte for byte,
    on q8_0 x (the family's default) and on float32 x (TF_Q8_0_X=float: blocks_vec's path)."""
    from kernels.blocks import ExpertGateUp, ExpertStack
    monkeypatch.setenv("TF_Q8_0_X", x_form)
    ld = load(str(files[name, "Q8_0"]), progress=False)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    assert bool(getattr(eng.model.ops, "q80", False)) == (x_form == "auto")
    ops = eng.model.ops                                    # the backend the engine chose
    L, w = eng.weights.layers[-1], eng.weights
    # gate and up as the file's two stacks, read in place (kernels.blocks.ExpertGateUp)
    assert isinstance(L.experts_gu, ExpertGateUp) and isinstance(L.experts_down, ExpertStack)
    assert L.experts_gu.gate.in_place and L.experts_gu.up.in_place and L.experts_down.in_place
    x = np.random.default_rng(0).standard_normal((13, ld.spec.d_model)).astype(np.float32)
    common = (L.router, L.router_bias)
    stacked = ops.moe(x, *common, L.experts_gu, L.experts_down, w.expert_ff, eng.model.routing,
                      L.shared_gu, L.shared_down, w.shared_ff)
    looped = ops.moe(x, *common, list(L.experts_gu), list(L.experts_down), w.expert_ff,
                     eng.model.routing, L.shared_gu, L.shared_down, w.shared_ff)
    assert stacked.tobytes() == looped.tobytes()
    for t in (0, 5, 12):                                   # and a row alone == in the batch
        alone = ops.moe(x[t:t + 1], *common, L.experts_gu, L.experts_down, w.expert_ff,
                        eng.model.routing, L.shared_gu, L.shared_down, w.shared_ff)
        assert alone.tobytes() == stacked[t:t + 1].tobytes()


def test_hf_glm_mtp_layer_is_counted_not_run(tmp_path, caplog):
    """A GLM HF folder's MTP layer (model.layers.{n_layers}.*, num_nextn_predict_layers 1)."""
    import json
    from safetensors.numpy import load_file, save_file
    spec = shape("tiny-glm4moe")
    folder = write_hf(tmp_path / "glm", spec)
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "num_nextn_predict_layers": 1}))
    t = load_file(str(folder / "model.safetensors"))
    n = spec.n_layers
    t[f"model.layers.{n}.eh_proj.weight"] = np.zeros((spec.d_model, 2 * spec.d_model), np.float32)
    t[f"model.layers.{n}.input_layernorm.weight"] = np.ones(spec.d_model, np.float32)
    save_file(t, str(folder / "model.safetensors"))
    with caplog.at_level(logging.INFO, logger="foldserve"):
        ld = load(str(folder), progress=False)
    assert ld.spec.n_layers == n and not any(k.startswith(f"model.layers.{n}.") for k in ld.tensors)
    assert f"MTP/NextN layer(s) {n} (2 tensors) not run" in caplog.text
    assert greedy(Engine(ld.spec, ld.tensors.__getitem__), [PROMPT]) == \
        greedy(engine_of("dummy:tiny-glm4moe"), [PROMPT])


def test_cuda_is_refused_for_moe_files_before_any_gpu(files):
    from server.engine.build import open_model
    for form in ("Q8_0", "hf"):
        with pytest.raises(UnsupportedModel) as e:
            open_model(str(files["tiny-qwen3moe", form]), device="cuda", progress=False)
        msg = str(e.value)
        assert "\n" not in msg and "qwen3moe family (mixture of experts)" in msg and "--device cpu" in msg
