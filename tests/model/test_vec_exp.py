"""kernels/vec_ir.py's exp recipe (exp_ir: attention's softmax, SwiGLU's silu on the CPU):
within ~1 ulp of exp over float32's finite range, the edges as exp's (0 below, inf above,
NaN kept), the same bytes in a vector's lanes as one value at a time, and softmax16's
padding (-inf lanes) changing nothing of the row it pads."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def _exp_each():
    from numba import njit

    from kernels.vec_ir import exp32

    @njit
    def each(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = exp32(x[i])
        return out
    return each


def test_exp_is_within_an_ulp_of_exp_and_keeps_its_edges():
    x = np.linspace(-104, 89, 400_001).astype(np.float32)
    got = _exp_each()(x).astype(np.float64)
    ref = np.exp(x.astype(np.float64))
    normal = (ref > np.finfo(np.float32).tiny) & (ref < np.finfo(np.float32).max)
    ulps = np.abs(got[normal] - ref[normal]) / np.spacing(ref[normal].astype(np.float32))
    assert ulps.max() <= 1.05
    edge = _exp_each()(np.array([-np.inf, -1e4, -104, 0.0, -0.0, 89, 1e4, np.inf, np.nan], np.float32))
    assert list(edge[:3]) == [0, 0, 0] and list(edge[3:5]) == [1, 1]
    assert np.isinf(edge[5:8]).all() and np.isnan(edge[8])


def test_swiglu_lanes_equal_the_one_at_a_time_tail():
    from kernels import rmsnorm_cpu
    rng = np.random.default_rng(2)
    g = (rng.standard_normal(1003) * 6).astype(np.float32)
    u = rng.standard_normal(1003).astype(np.float32)
    lanes, each = np.empty_like(g), np.empty_like(g)
    rmsnorm_cpu.swiglu_span(g, u, lanes, 0, 1003)        # 62 vectors of 16, then 11 alone
    for k in range(1003):
        rmsnorm_cpu.swiglu_span(g, u, each, k, k + 1)    # every element alone
    assert lanes.tobytes() == each.tobytes()
    ref = g.astype(np.float64) / (1 + np.exp(-g.astype(np.float64))) * u
    assert np.abs(lanes - ref).max() <= 1e-6 * np.abs(ref).max()


def test_softmax16_padding_changes_nothing_of_the_row():
    from numba import njit

    from kernels.vec_ir import softmax16

    @njit
    def soft(s, sc):
        softmax16(s, sc)
    rng = np.random.default_rng(3)
    row = rng.standard_normal(37).astype(np.float32)
    a = np.full(48, -np.inf, np.float32)
    a[:37] = row
    b = np.full(64, -np.inf, np.float32)
    b[:37] = row
    soft(a, np.float32(0.125))
    soft(b, np.float32(0.125))
    assert a[:37].tobytes() == b[:37].tobytes() and not a[37:].any() and not b[37:].any()
    z = row.astype(np.float64) * 0.125
    ref = np.exp(z - z.max()) / np.exp(z - z.max()).sum()
    assert np.abs(a[:37] - ref).max() <= 1e-6
