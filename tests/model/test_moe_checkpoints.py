"""The tiny MoE checkpoints CI regenerates are the files the references were recorded on,
and the records obey the golden rule they state (tests/data/moe/, provenance in
tests/data/README.md). No torch, no llama.cpp: the writer is numpy + safetensors + gguf."""
from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest

from server.engine.weights.gguf_file import GGUFFile
from tools.refs import moe_checkpoint as mc

DATA = Path(__file__).resolve().parents[1] / "data/moe"
# the records of F32 and Q8_0 references (tools/refs/record_moe.py); the K-quant records
# (mc.K_QUANT_FAMILIES: a Q4_K_M file's references, tests/model/test_moe_golden.py) are held
# here to their rule only
FAMILIES = sorted(n for n in mc.FAMILIES if n not in mc.K_QUANT_FAMILIES)
ALL = sorted(mc.FAMILIES)


def _record(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", FAMILIES)
def test_writer_regenerates_the_recorded_files(name):
    rec = _record(name)
    assert rec["checkpoint"]["spec"] == mc.spec_dict(mc.FAMILIES[name])
    built = mc.build_once(name)
    want = {k: v for k, v in rec["checkpoint"]["sha256"].items() if k in built.sha256}
    # every file build() makes was recorded (the dequantized HF folder is the recorder's extra)
    assert set(want) == set(built.sha256)
    assert built.sha256 == want


def _f32(t) -> np.ndarray:
    """An F32 tensor's values in numpy order (as GGUFReader's .data gives them)."""
    assert t.type_name == "F32", t.name
    return t.data.view(np.float32).reshape(t.shape)


@pytest.mark.parametrize("name", FAMILIES)
def test_gguf_holds_the_hf_tensors(name):
    """F32 GGUF tensor bytes are the HF tensors (experts stacked), Q8_0 blocks are their
    quantization, under llama.cpp's names and shapes."""
    b = mc.build_once(name)
    spec = b.spec
    w = mc.hf_weights(spec)
    # the loader's reader (held to gguf.GGUFReader's fields and tensors by
    # tests/model/test_gguf_header.py; GGUFReader parses every tokenizer string, ~3 s a file)
    f32 = {t.name: t for t in GGUFFile(str(b.gguf["F32"])).tensors}
    q8 = {t.name: t for t in GGUFFile(str(b.gguf["Q8_0"])).tensors}
    layout = dict(mc.gguf_layout(spec))
    assert set(f32) == set(layout) == set(q8)
    tensors = dict(mc.gguf_tensors(spec, w))
    for g, hs in layout.items():
        if hs[-1] in (mc.KV_B_K, mc.KV_B_V):       # deepseek2: kv_b split as the converter does
            arr = tensors[g]
        else:
            arr = w[hs[0]] if len(hs) == 1 else np.stack([w[h] for h in hs])
        assert np.array_equal(_f32(f32[g]).reshape(arr.shape), arr), g
        assert list(f32[g].dims) == list(reversed(arr.shape)), g       # ggml order
        want = mc.gguf_type(g, arr, "Q8_0")
        assert q8[g].type_name == want, g
    e = f"blk.{spec.n_layer - 1}.ffn_gate_exps.weight"
    assert list(f32[e].dims) == [spec.hidden, spec.expert_ff, spec.n_expert]
    assert q8[f"blk.{spec.n_layer - 1}.ffn_gate_inp.weight"].type_name == "F32"
    if spec.family == "deepseek2":                  # k_b [H, C, N] and v_b [H, V, C] join back
        for i in range(spec.n_layer):
            kb = _f32(f32[f"blk.{i}.attn_k_b.weight"])
            vb = _f32(f32[f"blk.{i}.attn_v_b.weight"])
            kv_b = w[f"model.layers.{i}.self_attn.kv_b_proj.weight"]
            assert np.array_equal(mc._kv_b_join(spec, kb, vb), kv_b)
            assert kb.shape == (spec.n_head, spec.kv_lora_rank, spec.qk_nope_head_dim)


@pytest.mark.parametrize("name", ALL)
def test_records_follow_their_rule(name):
    rec = _record(name)
    assert rec["checkpoint"]["spec"] == mc.spec_dict(mc.FAMILIES[name])
    n = rec["n_steps"]
    for qt, ref in rec["references"].items():
        assert len(ref["cases"]) == 7, qt
        for c in ref["cases"]:
            assert len(c["greedy_ids"]) == len(c["top5"]) == n
            assert c["greedy_ids"] == [t["ids"][0] for t in c["top5"]]
            margins = [t["logits"][0] - t["logits"][1] for t in c["top5"]]
            assert all(m >= 0 for m in margins)
            tie = next((i for i, m in enumerate(margins) if m < 2e-3), None)
            assert c["near_tie_step"] == tie
            assert c["exact_prefix"] == (n if tie is None else tie + 1)


@pytest.mark.parametrize("name", FAMILIES)
def test_llama_cpp_agrees_with_transformers_on_float32_weights(name):
    """The two recorded references agree under the rule where both compute in float32
    (llama.cpp's own Q8_0 path quantizes activations too, so it is recorded, not held)."""
    rec = _record(name)
    for block in ("F32", "Q8_0 weights as F32"):
        for c in rec["llama_cpp"][block]["cases"]:
            assert c["agreement"]["within_rule"], (block, c["name"])
            assert c["agreement"]["max_abs_logprob_diff"] < 1e-3, (block, c["name"])


# the records whose "Q8_0 q8_0" reference (tools/refs/record_q8ref.py) llama.cpp's own Q8_0
# run follows under the rule: its products are the reference's. The latent-attention records
# are not held: llama.cpp also rounds the absorbed k_b / v_b products' inputs (q8_0, or f16
# where the matrix is F16 in the file), which foldserve and the reference keep float32
Q8_0_FOLLOWED = ["glm4moe-tiny", "qwen3moe-tiny"]


@pytest.mark.parametrize("name", Q8_0_FOLLOWED)
def test_llama_cpp_q8_0_follows_the_q8_0_reference(name):
    """llama.cpp on the Q8_0 file (x quantized to q8_0 in every Q8_0 product) agrees with the
    "Q8_0 q8_0" reference under the rule, logprobs within 1e-4 (it does not agree with the
    float "Q8_0" one: the record's llama_cpp.Q8_0.agreement)."""
    ref = _record(name)["references"]["Q8_0 q8_0"]
    assert ref["products"]["not a product"] == ["model.embed_tokens.weight"]
    assert set(ref["products"]["float x"]) == {"model.layers.N.mlp.gate.weight"}
    assert "lm_head.weight" in ref["products"]["q8_0 x"]
    for c in ref["cases"]:
        ag = ref["llama_cpp_Q8_0_agreement"][c["name"]]
        assert ag["within_rule"] and ag["exact_prefix_met"] and ag["max_abs_logprob_diff"] < 1e-4, (c["name"], ag)


@pytest.mark.parametrize("name", FAMILIES)
@pytest.mark.parametrize("qtype", ["F32", "Q8_0"])
def test_numpy_definition_reproduces_the_records(name, qtype):
    """tools/refs/moe_numpy.py (float64, teacher-forced on the recorded greedy path) picks the
    recorded id at every step but near ties, with the recorded top-5 logits within 1e-3
    relative: a third implementation reads the checkpoints as transformers and llama.cpp do."""
    from tools.refs import moe_numpy
    spec = mc.FAMILIES[name]
    w = mc.hf_weights(spec) if qtype == "F32" else mc.dequantized_weights(spec, qtype)
    worst = 0.0
    for c in _record(name)["references"][qtype]["cases"]:
        n0 = len(c["prompt_ids"])
        logits = moe_numpy.forward(spec, w, c["prompt_ids"] + c["greedy_ids"][:-1])[n0 - 1:]
        for step, ref in enumerate(c["top5"]):
            got = logits[step][ref["ids"]]
            want = np.array(ref["logits"])
            worst = max(worst, float(np.max(np.abs(got - want) / np.abs(want))))
            if ref["logits"][0] - ref["logits"][1] >= 2e-3:
                assert int(np.argmax(logits[step])) == c["greedy_ids"][step], (c["name"], step)
    assert worst < 1e-3, worst
