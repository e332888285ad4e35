"""gpt-oss at the engine (server/families/gpt_oss.py) on the tiny shape (sliding window 8,
so a 20-token prompt and its decode cross the window's edge on layers 0 and 2): solo ==
concurrent, paged == window, resumed == fresh (a prompt prefilled in pieces, some cut inside
the window, equals it whole), byte for byte; the attention definition's window and sinks
against a direct float64 computation; the GPU refused by name."""
from __future__ import annotations

import numpy as np
import pytest

from server.engine.probe import solo_vs_concurrent
from server.shapes.spec import UnsupportedModel

from .test_moe_engine import PROMPT, engine_of, greedy

NAME = "dummy:tiny-gptoss"


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_solo_equals_concurrent(paged):
    r = solo_vs_concurrent(engine_of(NAME), paged=paged, context=128)
    assert r["equal_steps"] == r["steps"], r


def test_resumed_equals_fresh_and_paged_equals_window():
    eng = engine_of(NAME)
    whole = greedy(eng, [PROMPT], steps=12)
    assert greedy(eng, [PROMPT[:7], PROMPT[7:13], PROMPT[13:]], steps=12) == whole
    assert greedy(eng, [PROMPT[:9], PROMPT[9:]], steps=12, page_rows=8) == whole
    assert greedy(eng, [PROMPT], steps=12, paged=False) == whole


def test_attention_window_and_sinks_against_float64():
    from kernels.attention import ref
    rng = np.random.default_rng(0)
    n, hq, kv, hd, P, W = 20, 4, 2, 16, 8, 8
    q = rng.standard_normal((n, hq, hd)).astype(np.float32)
    k = rng.standard_normal((n, kv, hd)).astype(np.float32)
    v = rng.standard_normal((n, kv, hd)).astype(np.float32)
    sinks = rng.standard_normal(hq).astype(np.float32)
    kp = np.zeros((4, P, kv, hd), np.float32)
    vp = np.zeros((4, P, kv, hd), np.float32)
    table = (2, 0, 3)                              # pages out of order
    for p in range(n):
        kp[table[p // P], p % P], vp[table[p // P], p % P] = k[p], v[p]
    got = ref(q, kp, vp, table, P, 0, 0.25, sinks, W)
    for p in range(n):
        for h in range(hq):
            g = h // (hq // kv)
            lo = max(0, p - W + 1)
            s = (k[lo:p + 1, g].astype(np.float64) @ q[p, h]) * 0.25
            e = np.exp(np.append(s, sinks[h]) - max(s.max(), sinks[h]))
            want = (e[:-1] / e.sum()) @ v[lo:p + 1, g]
            assert np.allclose(got[p, h], want, rtol=1e-5, atol=1e-6), (p, h)


def test_cuda_refused_by_name():
    from server.engine.build import open_model
    with pytest.raises(UnsupportedModel, match="gptoss"):
        open_model(NAME, device="cuda", progress=False)
