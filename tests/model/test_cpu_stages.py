"""Each family lists its layers' CPU stages (server/families: cpu_stages), and the one-call
round (kernels/forward_cpu.py) is composed from those lists where every stage has a fused
form (forward_cpu.FORMS): the plain llama layer (LAYER), Qwen2's q/k/v biases, or those
stages in another order; q/k norms, partial RoPE or routed experts name stages without a
fused form, and the model says so once at startup. Fails when a family's list departs from what its forward
runs in the ways that decide the fused round, names a stage kernels do not know, or when the
composed round does not run the list's stages in the list's order."""
from __future__ import annotations

import logging
import re
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
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
    from kernels.forward_cpu import LAYER
    assert len(said) == 1 and "runs fused" in said[0] and " | ".join(LAYER) in said[0]
    caplog.clear()
    plain = m.family.cpu_stages
    monkeypatch.setattr(m, "family", SimpleNamespace(
        cpu_stages=lambda spec, L: plain(spec, L) + ("qk_norm",)))
    with caplog.at_level(logging.INFO, logger="foldserve"):
        assert Model._fused(m, m.w, None) is None
    said = [r.getMessage() for r in caplog.records if "CPU round" in r.getMessage()]
    assert len(said) == 1 and "op by op" in said[0] and "without a fused form: qk_norm" in said[0]
    caplog.clear()
    monkeypatch.setattr(m, "family", SimpleNamespace(
        cpu_stages=lambda spec, L: ("norm", "attend", "qkv", "o")))
    with caplog.at_level(logging.INFO, logger="foldserve"):
        assert Model._fused(m, m.w, None) is None
    said = [r.getMessage() for r in caplog.records if "CPU round" in r.getMessage()]
    assert len(said) == 1 and "do not compose" in said[0] and "'attend' reads ['qkv']" in said[0]
    monkeypatch.setattr(m, "family", SimpleNamespace(cpu_stages=lambda spec, L: ("warp",)))
    with pytest.raises(ValueError, match="warp"):
        m._fused(m.w, None)


def test_every_served_family_lists_its_stages():
    from server.families import FAMILIES
    missing = sorted({m.__name__ for m in FAMILIES.values() if not callable(vars(m).get("cpu_stages"))})
    assert missing == [], f"families without cpu_stages(spec, L): {missing}"


def test_the_round_is_composed_from_the_stage_list():
    """compose: each name its form's code, in the list's order; the round's first norm alone,
    each layer's norms their NORM_ROLES in turn; block sums written where the next matrix to
    read a buffer is Q4_1; the counter rows the forms take (+ the head's and the abort row)."""
    from kernels.forward_cpu import ALONE, FORMS, HALVE, HEAD_STAGES, LAYER, SUMS, compose
    kinds = {"wqkv": "Q8_0", "wo": "Q4_1", "wgu": "Q4_1", "wdown": "Q8_0"}
    prog, counters = compose([LAYER, LAYER], kinds)
    assert prog.shape == (2, len(LAYER), 3)
    for li in range(2):
        assert [FORMS[n].code for n in LAYER] == list(prog[li, :, 0])
        assert list(prog[li, :, 1]) == [0, 0, 0, 0, 1, 0, 0]         # attn_norm, mlp_norm
    flags = {(li, LAYER[k]): prog[li, k, 2] for li in range(2) for k in range(len(LAYER))}
    assert prog[0, 0, 2] == ALONE and prog[1, 0, 2] == 0              # the round's first only
    assert prog[0, 4, 2] == SUMS and prog[1, 4, 2] == SUMS            # x for gate_up (Q4_1)
    assert flags[0, "attend"] == SUMS | HALVE                         # att for o (Q4_1); a crew
    assert flags[1, "attend"] == SUMS | HALVE                         # of two halves a last job
    assert flags[0, "gate_up_swiglu"] == 0 and flags[0, "qkv"] == 0  # act for down (Q8_0)
    assert counters == 2 * sum(FORMS[n].counters for n in LAYER) + HEAD_STAGES + 1
    mlp_first = LAYER[4:] + LAYER[:4]
    prog, _ = compose([mlp_first], kinds)
    assert [FORMS[n].code for n in mlp_first] == list(prog[0, :, 0])
    assert prog[0, 0, 2] == ALONE | SUMS and prog[0, 3, 2] == 0       # x for gate_up, then qkv
    # one norm's x read by two matrices: its sums where either reads them (Q4_1 second here)
    both = ("norm", "qkv", "attend", "o", "gate_up_swiglu", "down")
    prog, _ = compose([both], {"wqkv": "Q8_0", "wgu": "Q4_1"})
    assert prog[0, 0, 2] == ALONE | SUMS
    prog, _ = compose([both], {"wqkv": "Q8_0", "wgu": "Q8_0"})
    assert prog[0, 0, 2] == ALONE


@pytest.mark.parametrize("stages, says", [
    ([("norm", "qkv", "qk_norm", "attend", "o")], "'qk_norm' has no fused form"),
    ([("norm", "attend", "qkv", "o")], "'attend' reads ['qkv']"),
    ([("norm", "qkv", "attend")], "leaves no out"),
    ([("norm", "norm", "norm", "gate_up_swiglu", "down")], "more than 2 norm stages"),
])
def test_a_list_that_does_not_compose_is_refused_by_name(stages, says):
    from kernels.forward_cpu import compose
    with pytest.raises(ValueError, match=re.escape(says)):
        compose(stages, {})


def _mlp_first_family():
    """A family whose layer runs the MLP before the attention (the first norm attn_norm's, the
    second mlp_norm's): its op-by-op forward and its stage list, in that order."""
    from server.families import llama

    def forward_layer(ops, m, L, li, h, out, r, kv):
        s, w = m.spec, m.w
        act, h = ops.norm_linear(out, h, L.attn_norm, s.rms_eps, L.wgu, glu_ff=w.ff)
        out = ops.linear(act, L.wdown)
        qkv, h = ops.norm_linear(out, h, L.mlp_norm, s.rms_eps, L.wqkv, None)
        T = qkv.shape[0]
        att = ops.qkv_attend(qkv, w.nq, w.nkv, s.head_dim, r.pos, m.inv, kv.k(li), kv.v(li), r,
                             m.scale, None, s.rms_eps, rot=s.rot)
        return h, ops.linear(att.reshape(T, w.nq * s.head_dim), L.wo)

    def cpu_stages(spec, L):
        st = llama.cpu_stages(spec, L)
        return st[4:] + st[:4]
    return SimpleNamespace(forward_layer=forward_layer, cpu_stages=cpu_stages)


def test_another_stage_order_runs_fused_in_that_order(real_model):
    """The default model's weights under a family listing its layer MLP first: the fused round
    composed from that list equals that family's op-by-op forward, byte for byte (a round
    wired to the llama layer's order would not)."""
    from server.engine.model import Model
    from tests.model.test_forward_cpu import _rounds
    eng = real_model.engine
    m = eng.model
    keep = m.family, m.fused
    try:
        m.family = _mlp_first_family()
        m.fused = Model._fused(m, m.w, None)
        assert m.fused is not None
        a = _rounds(eng, True, fused=True)
        b = _rounds(eng, True, fused=False)
    finally:
        m.family, m.fused = keep
    plain = _rounds(eng, True, fused=True)
    assert a[0][1] != plain[0][1], "the reordered layer should change the logits"
    for i, (x, y) in enumerate(zip(a[0], b[0])):
        assert x == y, f"round {i}: the composed round differs from the family's op-by-op forward"
    assert a[1] == b[1] and a[2] == b[2]


def test_a_layer_with_qkv_biases_runs_fused_and_equals_its_op_by_op_path(real_model):
    """Qwen2's q/k/v biases (the qkv_bias stage, a fused form): the default model's layers
    given random biases list norm, qkv, qkv_bias, attend, ...; the round composed from that
    list runs fused and equals the op-by-op path byte for byte, and the biases change it."""
    from kernels.forward_cpu import FORMS
    from server.engine.model import Model
    from tests.model.test_forward_cpu import _rounds
    eng = real_model.engine
    m = eng.model
    plain = _rounds(eng, True, fused=True)
    rng = np.random.default_rng(11)
    width = (m.w.nq + 2 * m.w.nkv) * m.spec.head_dim
    keep = m.fused
    try:
        for L in m.w.layers:
            L.bqkv = (rng.standard_normal(width) * 0.5).astype(np.float32)
        assert all("qkv_bias" in m.family.cpu_stages(m.spec, L) for L in m.w.layers)
        assert set(m.family.cpu_stages(m.spec, m.w.layers[0])) <= set(FORMS)
        m.fused = Model._fused(m, m.w, None)
        assert m.fused is not None
        a = _rounds(eng, True, fused=True)
        b = _rounds(eng, True, fused=False)
    finally:
        for L in m.w.layers:
            L.bqkv = None
        m.fused = keep
    assert a[0][1] != plain[0][1], "the biases should change the logits"
    for i, (x, y) in enumerate(zip(a[0], b[0])):
        assert x == y, f"round {i}: the fused qkv_bias round differs from the op-by-op path"
    assert a[1] == b[1] and a[2] == b[2]
