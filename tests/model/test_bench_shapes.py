"""bench/moe_cpu.py's random files of a shape (gpt-oss MXFP4, qwen35moe Q8_0): the blocks
decode (gguf's reference dequantizer) to values of the std asked, the writer's file holds
the plan's names, types and shapes, and the qwen3.5 shape keeps its 3:1 pattern."""
import math

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from bench import moe_cpu as mc  # noqa: E402


@pytest.mark.parametrize("kind", ["Q8_0", "MXFP4"])
def test_random_blocks_decode_to_the_std_asked(kind):
    std = 1.0 / math.sqrt(2880)
    raw = mc._BLOCK[kind][1](np.random.default_rng(0), (64, 2880), std)
    x = gguf.quants.dequantize(raw, gguf.GGMLQuantizationType[kind]).reshape(64, 2880)
    assert 0.5 * std < float(x.std()) < 2.0 * std, (kind, float(x.std()), std)
    assert abs(float(x.mean())) < 0.1 * std


def test_the_writer_holds_the_plan(tmp_path):
    plan = [("token_embd.weight", (300, 64), "Q8_0"), ("blk.0.attn_norm.weight", (64,), "F32"),
            ("blk.0.ssm_a", (4,), "F32"), ("blk.0.ffn_gate_exps.weight", (2, 32, 64), "MXFP4"),
            ("blk.0.ffn_gate_inp.weight", (2, 64), "F32")]
    p = tmp_path / "t.gguf"
    mc.write_random_gguf(p, "gpt-oss", "t", lambda wr: wr.add_block_count(1), plan, 49200, 1)
    r = gguf.GGUFReader(str(p))
    got = {t.name: t for t in r.tensors}
    assert list(got) == [g for g, _, _ in plan]
    for g, shape, kind in plan:
        t = got[g]
        assert t.tensor_type == gguf.GGMLQuantizationType[kind], g
        assert tuple(int(n) for n in reversed(t.shape)) == shape, g
    assert np.all(got["blk.0.attn_norm.weight"].data == 1)
    assert np.all(got["blk.0.ssm_a"].data < 0)          # the loader refuses ssm_a >= 0
    assert len(r.fields["tokenizer.ggml.tokens"].data) == 49200      # SmolLM2's 49,152 padded


def test_qwen35_keeps_the_3_to_1_pattern():
    c = mc.qwen35_config(8)
    assert c["layer_types"] == (["linear_attention"] * 3 + ["full_attention"]) * 2
    with pytest.raises(ValueError, match="--layers 6"):
        mc.qwen35_config(6)
