"""The MoE router's definition (kernels/moe.py) against hand-computed cases: softmax then
top-k then renormalise (Qwen3-MoE); sigmoid with the selection-only bias, group-limited
top-k, renormalise, times routed_scaling_factor (GLM); ties to the lower id; a row's choice
never depends on the other rows."""
from __future__ import annotations

import math

import numpy as np
import pytest

from kernels.moe import Routing, combine, groups, route


def test_softmax_top2_renormalised():
    ids, w = route(np.array([[1.0, 3.0, 2.0, 0.0]], np.float32), Routing("softmax", 2, True, 1.0))
    assert ids.tolist() == [[1, 2]]                       # ascending id: the summation order
    e3, e2 = math.exp(3.0), math.exp(2.0)
    np.testing.assert_allclose(w[0], [e3 / (e3 + e2), e2 / (e3 + e2)], rtol=1e-7)


def test_softmax_without_renormalising_keeps_the_probabilities():
    z = np.array([1.0, 3.0, 2.0, 0.0])
    p = np.exp(z) / np.exp(z).sum()
    ids, w = route(z[None].astype(np.float32), Routing("softmax", 2, False, 1.0))
    assert ids.tolist() == [[1, 2]]
    np.testing.assert_allclose(w[0], [p[1], p[2]], rtol=1e-7)


def test_sigmoid_bias_selects_but_does_not_weigh():
    # all logits 0: every sigmoid is 0.5; the bias alone picks experts 1 and 3
    bias = np.array([0.0, 0.5, -0.1, 0.2], np.float32)
    ids, w = route(np.zeros((1, 4), np.float32), Routing("sigmoid", 2, False, 1.0), bias)
    assert ids.tolist() == [[1, 3]]
    np.testing.assert_allclose(w[0], [0.5, 0.5])          # the unbiased sigmoid
    ids, w = route(np.zeros((1, 4), np.float32), Routing("sigmoid", 2, True, 2.5), bias)
    np.testing.assert_allclose(w[0], [1.25, 1.25], rtol=1e-6)  # 0.5 / 1.0 * 2.5


def test_sigmoid_weights_by_hand():
    z = np.array([[2.0, -1.0, 0.5, 1.0]], np.float32)
    s = 1 / (1 + np.exp(-z[0].astype(np.float64)))
    ids, w = route(z, Routing("sigmoid", 2, True, 2.0), np.zeros(4, np.float32))
    assert ids.tolist() == [[0, 3]]
    np.testing.assert_allclose(w[0], [2 * s[0] / (s[0] + s[3]), 2 * s[3] / (s[0] + s[3])], rtol=1e-6)


def test_group_limited_top_k_keeps_the_best_group_only():
    # scores (sigmoid of these logits) ~ [0.9, 0.1, 0.6, 0.6]: group 0 = {0, 1} sums its two best
    # to 1.0, group 1 = {2, 3} to 1.2; one group kept, so expert 0 (the best alone) is out
    z = np.log(np.array([[0.9, 0.1, 0.6, 0.6]]) / (1 - np.array([[0.9, 0.1, 0.6, 0.6]])))
    ids, _ = route(z.astype(np.float32), Routing("sigmoid", 2, True, 1.0, n_group=2, topk_group=1))
    assert ids.tolist() == [[2, 3]]
    ids, _ = route(z.astype(np.float32), Routing("sigmoid", 2, True, 1.0))   # no groups: 0 wins
    assert ids.tolist() == [[0, 2]]


def test_ties_choose_the_lower_id():
    ids, w = route(np.zeros((1, 6), np.float32), Routing("softmax", 3, True, 1.0))
    assert ids.tolist() == [[0, 1, 2]]
    np.testing.assert_allclose(w[0], [1 / 3] * 3, rtol=1e-6)


@pytest.mark.parametrize("kind", ["softmax", "sigmoid"])
def test_a_rows_choice_is_its_own(kind):
    rng = np.random.default_rng(0)
    z = rng.standard_normal((9, 16)).astype(np.float32)
    bias = rng.standard_normal(16).astype(np.float32) * 0.1
    r = Routing(kind, 4, True, 2.5, n_group=4, topk_group=2)
    ids, w = route(z, r, bias)
    for t in range(9):
        i1, w1 = route(z[t:t + 1], r, bias)
        assert i1.tolist() == ids[t:t + 1].tolist() and w1.tobytes() == w[t:t + 1].tobytes()


@pytest.mark.parametrize("kind", ["softmax", "sigmoid"])
def test_a_rows_weights_ignore_the_other_rows_scale(kind):
    """Rows of very different scale in one round (a row of logits near 900 beside one near 0):
    each row's ids and weights are the bytes it gets alone; a batch-wide max or sum would
    underflow the small row's exponentials."""
    z = np.array([[0.5, 2.0, -1.0, 1.0, 0.0, 3.0],
                  [900.0, 902.0, 899.0, 901.5, 898.0, 900.5]], np.float32)
    r = Routing(kind, 3, True, 1.5)
    ids, w = route(z, r, np.zeros(6, np.float32))
    assert np.isfinite(w).all()
    for t in range(2):
        i1, w1 = route(z[t:t + 1], r, np.zeros(6, np.float32))
        assert i1.tolist() == ids[t:t + 1].tolist() and w1.tobytes() == w[t:t + 1].tobytes()
    # the sigmoids of the row near 900 all round to 1.0: a tie, the lowest ids
    assert ids.tolist() == [[1, 3, 5], [1, 3, 5] if kind == "softmax" else [0, 1, 2]]


def test_groups_and_combine_order():
    ids = np.array([[0, 2], [2, 5], [0, 5]])
    got = [(e, t.tolist(), s.tolist()) for e, t, s in groups(ids)]
    assert got == [(0, [0, 2], [0, 0]), (2, [0, 1], [1, 0]), (5, [1, 2], [1, 1])]
    # ((0 + w0 y0) + w1 y1) in float32, slot order
    y = np.array([[[1e8], [1.0]], [[1.0], [-1e8]], [[3.0], [4.0]]], np.float32)
    w = np.array([[1.0, 1.0], [1.0, 1.0], [0.5, 0.25]], np.float32)
    out = combine(y, w)
    assert out[:, 0].tolist() == [np.float32(1e8) + np.float32(1.0), np.float32(1.0) + np.float32(-1e8), 2.5]
