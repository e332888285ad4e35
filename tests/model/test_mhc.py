"""mHC (kernels/mhc.py) against transformers' glm5_next on seeded inputs recorded once
(tools/refs/record_glm53.py -> tests/data/glm53/mhc_case.json), and its fixed order: a token
alone == the same token in a batch, byte for byte; the Sinkhorn's count and order matter (a
guard: 19 iterations, or rows before columns, move the numbers past the tolerance)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels import mhc
from tools.refs import glm53_cases as cases

CASE = json.loads((Path(__file__).resolve().parents[1] / "data/glm53/mhc_case.json").read_text())
TOL = 2e-6          # float32, other summation orders than torch's


@pytest.fixture(scope="module")
def inputs():
    x = cases.mhc_inputs(CASE["case"])
    assert cases.digest(x) == CASE["inputs_sha256"], "the seeded inputs changed; re-record"
    return x


def run(x, c=CASE["case"], **over):
    kw = {"norm_eps": c["norm_eps"], "hc_eps": c["hc_eps"], "iters": c["iters"], **over}
    fn_t = np.ascontiguousarray(x["fn"].T)
    pre, post, comb = mhc.weights(x["streams"], fn_t, x["base"], x["scale"], **kw)
    collapsed = mhc.collapse(x["streams"], pre)
    out = mhc.post_mix(x["y"], x["streams"], post, comb)
    return {"post": post, "comb": comb, "collapsed": collapsed, "out": out,
            "head": mhc.head(out)}


def close(got, key):
    want = np.asarray(CASE[key], np.float32)
    assert got.shape == want.shape, key
    return float(np.abs(got - want).max() / max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("key", ["post", "comb", "collapsed", "out", "head"])
def test_matches_transformers(inputs, key):
    assert close(run(inputs)[key], key) <= TOL


def test_comb_is_doubly_stochastic(inputs):
    comb = run(inputs)["comb"].astype(np.float64)
    assert np.abs(comb.sum(axis=1) - 1).max() < 1e-4      # columns (the last normalisation)
    assert np.abs(comb.sum(axis=2) - 1).max() < 0.1       # rows: still converging (sharp logits)
    assert not np.allclose(comb, 0.25, atol=1e-2)         # not the trivial matrix


def test_a_token_alone_equals_it_in_a_batch(inputs):
    whole = run(inputs)
    T = inputs["streams"].shape[0]
    for t in range(T):
        one = run({k: (v[t:t + 1] if k in ("streams", "y") else v) for k, v in inputs.items()})
        for k in ("post", "comb", "collapsed", "out", "head"):
            assert np.array_equal(one[k][0].view(np.uint32), whole[k][t].view(np.uint32)), (t, k)
    # and in a bigger batch of other tokens (the projection's 4-row tiles change around it)
    rng = np.random.default_rng(9)
    big = dict(inputs)
    big["streams"] = np.concatenate([rng.standard_normal((7,) + inputs["streams"].shape[1:]).astype(np.float32),
                                     inputs["streams"]])
    big["y"] = np.concatenate([rng.standard_normal((7, inputs["y"].shape[1])).astype(np.float32), inputs["y"]])
    b = run(big)
    for k in ("out", "head"):
        assert np.array_equal(b[k][7:].view(np.uint32), whole[k].view(np.uint32)), k


def test_the_sinkhorn_count_and_order_matter(inputs):
    """The guard: the recorded comb tells 20 iterations from 19, and columns-first from rows-first."""
    assert close(run(inputs, iters=19)["comb"], "comb") > 10 * TOL

    def rows_first(streams, fn_t, base, scale, *, norm_eps, hc_eps, iters):
        pre, post, comb = mhc.weights(streams, fn_t, base, scale, norm_eps=norm_eps,
                                      hc_eps=hc_eps, iters=1)
        c = comb.astype(np.float32)
        for _ in range(iters):
            c = c / (c.sum(axis=2, keepdims=True) + np.float32(hc_eps))
            c = c / (c.sum(axis=1, keepdims=True) + np.float32(hc_eps))
        return c
    c = CASE["case"]
    other = rows_first(inputs["streams"], np.ascontiguousarray(inputs["fn"].T), inputs["base"],
                       inputs["scale"], norm_eps=c["norm_eps"], hc_eps=c["hc_eps"], iters=c["iters"])
    assert close(other, "comb") > 10 * TOL


def test_the_head_is_the_mean_not_the_first_stream(inputs):
    out = run(inputs)["out"]
    assert np.abs(mhc.head(out) - out[:, 0]).max() > 1e-2


def test_a_wrong_fn_shape_is_named(inputs):
    with pytest.raises(ValueError, match="mhc: fn is"):
        mhc.weights(inputs["streams"], inputs["fn"], inputs["base"], inputs["scale"],
                    norm_eps=1e-5, hc_eps=1e-6, iters=20)
