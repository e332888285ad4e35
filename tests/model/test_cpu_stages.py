"""Each family lists its layers' CPU stages (server/families: cpu_stages), and the one-call
round (kernels/forward_cpu.py) is taken where every layer's list is its LAYER: the plain llama
layer alone; a qkv bias, q/k norms, partial RoPE or routed experts name the stages without a
fused form, and the model says so once at startup. Fails when a family's list departs from
what its forward runs in the ways that decide the fused round, or names a stage kernels do
not know."""
from __future__ import annotations

import logging
from dataclasses import replace
from types import SimpleNamespace

import pytest

from kernels import qmatmul
from server.families import deepseek2, gpt_oss, llama, moe, qwen3next
from server.shapes.spec import SHAPES

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def layer(**kw):
    base = dict(bqkv=None, q_norm=None, router=None, shared_gu=None, wq_a=None, linear=False)
    return SimpleNamespace(**{**base, **kw})


def test_the_plain_llama_layer_is_the_fused_rounds_and_its_options_are_not():
    from kernels.forward_cpu import LAYER
    spec = SHAPES["smollm2-135m"]
    assert llama.cpu_stages(spec, layer()) == LAYER
    assert "qkv_bias" in llama.cpu_stages(spec, layer(bqkv=object()))
    assert "qk_norm" in llama.cpu_stages(spec, layer(q_norm=object()))
    half = replace(spec, rotary_dim=spec.head_dim // 2)
    assert "rope_part" in llama.cpu_stages(half, layer())
    assert moe.cpu_stages(spec, layer()) == LAYER              # a leading dense layer
    routed = moe.cpu_stages(spec, layer(router=object(), shared_gu=object()))
    assert routed[-2:] == ("moe", "shared_expert") and "gate_up_swiglu" not in routed


def test_every_family_names_known_stages():
    from kernels.forward_cpu import LAYER, STAGE_NAMES
    spec = SHAPES["smollm2-135m"]
    lists = [gpt_oss.cpu_stages(spec, layer()),
             deepseek2.cpu_stages(spec, layer(wq_a=object(), router=object())),
             deepseek2.cpu_stages(spec, layer()),
             qwen3next.cpu_stages(spec, layer(linear=True)),
             qwen3next.cpu_stages(spec, layer())]
    for st in lists:
        assert set(st) <= set(STAGE_NAMES), st
        assert st != LAYER
    assert set(LAYER) <= set(STAGE_NAMES)


def test_startup_says_fused_or_why_not(real_model, caplog, monkeypatch):
    """The default model: fused, said once; the same weights with a layer listing a stage
    without a fused form: op by op, that stage named."""
    from server.engine.model import Model
    m = real_model.engine.model
    with caplog.at_level(logging.INFO, logger="foldserve"):
        fused = m._fused(m.w, None)
    assert fused is not None
    said = [r.getMessage() for r in caplog.records if "CPU round" in r.getMessage()]
    assert len(said) == 1 and "runs fused" in said[0]
    caplog.clear()
    plain = m.family.cpu_stages
    monkeypatch.setattr(m, "family", SimpleNamespace(
        cpu_stages=lambda spec, L: plain(spec, L) + ("qkv_bias",)))
    with caplog.at_level(logging.INFO, logger="foldserve"):
        assert Model._fused(m, m.w, None) is None
    said = [r.getMessage() for r in caplog.records if "CPU round" in r.getMessage()]
    assert len(said) == 1 and "op by op" in said[0] and "qkv_bias" in said[0]
    monkeypatch.setattr(m, "family", SimpleNamespace(cpu_stages=lambda spec, L: ("warp",)))
    with pytest.raises(ValueError, match="warp"):
        m._fused(m.w, None)


def test_every_served_family_lists_its_stages():
    from server.families import FAMILIES
    missing = sorted({m.__name__ for m in FAMILIES.values() if not callable(vars(m).get("cpu_stages"))})
    assert missing == [], f"families without cpu_stages(spec, L): {missing}"
