"""mHC's numba form (kernels/mhc_cpu.py) against its numpy definition (kernels/mhc.py) and
transformers' recorded case (tests/data/glm53/mhc_case.json) within float32 rounding, and its
own fixed order: a token alone == the same token in a batch, serial == parallel, byte for
byte; the Sinkhorn count still matters (a guard: 19 iterations move comb past the
tolerance)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kernels import mhc
from tools.refs import glm53_cases as cases

mhc_cpu = pytest.importorskip("kernels.mhc_cpu")

CASE = json.loads((Path(__file__).resolve().parents[1] / "data/glm53/mhc_case.json").read_text())
TOL = 2e-6          # float32, other summation orders than numpy's and torch's


@pytest.fixture(scope="module")
def inputs():
    x = cases.mhc_inputs(CASE["case"])
    assert cases.digest(x) == CASE["inputs_sha256"], "the seeded inputs changed; re-record"
    return x


def kw(c=CASE["case"], **over):
    return {"norm_eps": c["norm_eps"], "hc_eps": c["hc_eps"], "iters": c["iters"], **over}


def run_cpu(x, **over):
    fn = mhc_cpu.fn_rows(np.ascontiguousarray(x["fn"].T))
    collapsed, post, comb = mhc_cpu.pre(x["streams"], fn, x["base"], x["scale"], **kw(**over))
    out = mhc_cpu.post_mix(x["y"], x["streams"], post, comb)
    return {"post": post, "comb": comb, "collapsed": collapsed, "out": out,
            "head": mhc_cpu.head(out)}


def run_def(x, **over):
    fn_t = np.ascontiguousarray(x["fn"].T)
    pre, post, comb = mhc.weights(x["streams"], fn_t, x["base"], x["scale"], **kw(**over))
    out = mhc.post_mix(x["y"], x["streams"], post, comb)
    return {"post": post, "comb": comb, "collapsed": mhc.collapse(x["streams"], pre), "out": out,
            "head": mhc.head(out)}


def rel(a, b):
    return float(np.abs(a.astype(np.float64) - b).max() / max(1.0, np.abs(b).max()))


KEYS = ("post", "comb", "collapsed", "out", "head")


@pytest.mark.parametrize("key", KEYS)
def test_matches_the_definition_and_transformers(inputs, key):
    got, want = run_cpu(inputs)[key], run_def(inputs)[key]
    assert got.dtype == np.float32 and np.isfinite(got).all()
    assert rel(got, want) <= TOL
    assert rel(got, np.asarray(CASE[key], np.float32)) <= TOL


def test_at_the_models_width():
    """GLM-5.3-Flash's 4 streams of 4096 (the width the engine runs), a few tokens."""
    rng = np.random.default_rng(5)
    T, N, D = 3, 4, 4096
    x = {"streams": rng.standard_normal((T, N, D)).astype(np.float32),
         "fn": (rng.standard_normal(((2 + N) * N, N * D)) / np.sqrt(N * D)).astype(np.float32),
         "base": rng.standard_normal((2 + N) * N).astype(np.float32),
         "scale": rng.uniform(0.5, 1.5, 3).astype(np.float32),
         "y": rng.standard_normal((T, D)).astype(np.float32)}
    a, b = run_cpu(x), run_def(x)
    for k in KEYS:
        assert rel(a[k], b[k]) <= TOL, k


def test_a_token_alone_equals_it_in_a_batch_and_serial_equals_parallel(inputs, monkeypatch):
    whole = run_cpu(inputs)
    T = inputs["streams"].shape[0]
    assert T >= mhc_cpu.PARALLEL_ROWS                     # the batch ran in a parallel region
    for t in range(T):
        one = run_cpu({k: (v[t:t + 1] if k in ("streams", "y") else v) for k, v in inputs.items()})
        for k in KEYS:
            assert np.array_equal(one[k][0].view(np.uint32), whole[k][t].view(np.uint32)), (t, k)
    monkeypatch.setattr(mhc_cpu, "PARALLEL_ROWS", 10 ** 9)
    serial = run_cpu(inputs)
    for k in KEYS:
        assert np.array_equal(serial[k].view(np.uint32), whole[k].view(np.uint32)), k


def test_the_sinkhorn_count_matters(inputs):
    """A kernel one iteration short would fail the comparison above: 19 iterations move comb
    past the tolerance."""
    assert rel(run_cpu(inputs, iters=19)["comb"], run_def(inputs)["comb"]) > 10 * TOL


def test_shapes_are_checked(inputs):
    fn = mhc_cpu.fn_rows(np.ascontiguousarray(inputs["fn"].T))
    with pytest.raises(ValueError, match="mhc_cpu: fn is"):
        mhc_cpu.pre(inputs["streams"][:, :3], fn, inputs["base"], inputs["scale"], **kw())
    with pytest.raises(ValueError, match="hc_sinkhorn_iters = 0"):
        mhc_cpu.pre(inputs["streams"], fn, inputs["base"], inputs["scale"], **kw(iters=0))
