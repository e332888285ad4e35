"""Kimi Delta Attention (kernels/kda.py, kernels/kda_cpu.py): the op against transformers'
own functions (tests/data/kimi_linear/kda-case.json, made by tools/refs/record_kimi_linear.py
on tools/refs/kimi_checkpoint.py's seeded inputs) and against its numba form, both gates
(Kimi-Linear's softplus and the safe gate's lower bound); one recurrence order (every cut of
the positions leaves the same output, state and window bytes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tools.refs.kimi_checkpoint import kda_inputs

DATA = Path(__file__).resolve().parents[1] / "data" / "kimi_linear" / "kda-case.json"
CASES = ("kimi", "safe")


def record():
    return json.loads(DATA.read_text())


def _fns():
    from kernels import kda, kda_cpu
    return {"numpy": kda.chunk, "numba": kda_cpu.chunk}


def _run(fn, x, p, splits, state=None):
    """fn over the case's positions cut at `splits`; -> (out, state, window)."""
    H, D, K = p["H"], p["D"], p["K"]
    C = x["mix"].shape[1]
    state = np.zeros((H, D, D), np.float32) if state is None else state.copy()
    window = np.zeros((K - 1, C), np.float32)
    outs, a = [], 0
    for b in list(splits) + [x["mix"].shape[0]]:
        if b > a:
            outs.append(fn(x["mix"][a:b], x["f"][a:b], x["b"][a:b], x["gate"][a:b], x["conv_w"],
                           x["A_log"], x["dt_bias"], x["norm_w"], p["eps"], window, state,
                           p["lower_bound"]))
        a = b
    return np.concatenate(outs), state, window


@pytest.mark.parametrize("case", CASES)
def test_definition_matches_transformers_and_the_numba_form(case):
    """kernels/kda.py (numpy) and kernels/kda_cpu.py (numba): within float32 rounding of
    transformers' recurrent KDA (conv, forget gate, l2norm, gated norm around it), and of
    each other; the log decays equal transformers' forget gate."""
    from kernels import kda
    rec = record()["cases"][case]
    p = rec["params"]
    x = kda_inputs(p)
    n, H, D = p["n"], p["H"], p["D"]
    g = kda.log_decay(x["f"], x["A_log"], x["dt_bias"], p["lower_bound"])
    # rtol 2e-5: our softplus is log1p(exp(x)), transformers' log(1 + exp(x))
    np.testing.assert_allclose(g.ravel(), np.array(rec["g"], np.float32), rtol=2e-5, atol=1e-7)
    want = np.array(rec["recurrent"]["out"], np.float32).reshape(n, H * D)
    want_s = np.array(rec["recurrent"]["state"], np.float32).reshape(H, D, D)
    got = {}
    for name, fn in _fns().items():
        out, state, window = _run(fn, x, p, [])
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(state, want_s, rtol=1e-4, atol=2e-6, err_msg=name)
        np.testing.assert_array_equal(window, x["mix"][-(p["K"] - 1):])
        got[name] = out
    np.testing.assert_allclose(got["numpy"], got["numba"], rtol=1e-4, atol=2e-6)
    assert np.max(np.abs(want)) > 0.1
    # the reference's own chunked route is a different rounding of the same function
    assert rec["chunked_vs_recurrent_max_abs"] < 1e-4


def test_the_gates_differ():
    """The safe gate is not the softplus gate (a test that feeds one to the other fails): the
    same inputs under each give different decays and outputs; the safe gate stays in
    (lower_bound, 0)."""
    from kernels import kda
    p = dict(record()["cases"]["kimi"]["params"])
    x = kda_inputs(p)
    g0 = kda.log_decay(x["f"], x["A_log"], x["dt_bias"], None)
    g1 = kda.log_decay(x["f"], x["A_log"], x["dt_bias"], -5.0)
    assert np.all(g1 > -5.0) and np.all(g1 < 0) and np.all(g0 < 0)
    assert np.max(np.abs(g0 - g1)) > 0.1
    o0 = _run(_fns()["numba"], x, p, [])[0]
    o1 = _run(_fns()["numba"], x, {**p, "lower_bound": -5.0}, [])[0]
    assert not np.allclose(o0, o1)


def test_per_channel_decay():
    """A decay per k channel, not per head: one channel's forget input at position 1 moves
    that channel's state row most (the others move only through S^T k), and no other head."""
    p = dict(record()["cases"]["kimi"]["params"], n=2)
    x = {k: (v[:2] if v.shape[0] == 70 else v) for k, v in kda_inputs(p).items()}
    fn = _fns()["numba"]
    s0 = _run(fn, x, p, [])[1]
    x2 = dict(x, f=x["f"].copy())
    x2["f"][1, 3] += 2.0                                  # head 0, channel 3, position 1
    s1 = _run(fn, x2, p, [])[1]
    diff = np.abs(s1 - s0).max(axis=2)                    # [H, D] rows that moved
    others = np.delete(diff[0], 3)
    assert diff[0, 3] > 10 * others.max() and not diff[1].any()


@pytest.mark.parametrize("which", ["numpy", "numba"])
@pytest.mark.parametrize("case", CASES)
def test_one_recurrence_order_at_the_op(which, case):
    """Every cut of the positions (one call, token by token, chunks of 2..n-1, uneven cuts)
    leaves the same output, state and window bytes, from a zero and a nonzero state."""
    fn = _fns()[which]
    p = record()["cases"][case]["params"]
    x = kda_inputs(p)
    n = 24 if which == "numpy" else p["n"]
    x = {k: (v[:n] if v.shape[0] == p["n"] else v) for k, v in x.items()}
    start = np.random.default_rng(3).standard_normal((p["H"], p["D"], p["D"])).astype(np.float32)
    for s0 in (None, start):
        ref = _run(fn, x, p, [], s0)
        cuts = [list(range(1, n))] + [list(range(s, n, s)) for s in range(2, n)] + \
            [[1, 4, 5, 11], [7], [n - 1]]
        for c in cuts:
            got = _run(fn, x, p, c, s0)
            for g, r in zip(got, ref):
                assert g.tobytes() == r.tobytes(), c
