"""The sampler: greedy, filters, penalties, seeds and logprobs on small hand-made logits."""
from __future__ import annotations

import numpy as np

from server.engine.sampler import SamplerState, sample
from server.requests import SamplingParams


def _draws(logits, n=400, **kw):
    st = SamplerState(SamplingParams(temperature=1.0, seed=3, **kw), [0])
    return {sample(np.array(logits, np.float32), st)[0] for _ in range(n)}


def test_greedy_is_first_argmax():
    st = SamplerState(SamplingParams(temperature=0.0), [1])
    assert sample(np.array([0.0, 2.0, 2.0, 1.0], np.float32), st)[0] == 1


def test_top_k_top_p_min_p_limit_the_choices():
    logits = [3.0, 2.9, 2.8, -5.0, -6.0]
    assert _draws(logits, top_k=2) == {0, 1}
    assert _draws(logits) >= {0, 1, 2}
    assert _draws(logits, top_p=0.5) <= {0, 1}
    assert _draws(logits, min_p=0.5) == {0, 1, 2}


def test_penalties_move_away_from_seen_tokens():
    st = SamplerState(SamplingParams(temperature=0.0, frequency_penalty=1.5), [9])
    row = np.array([1.0, 0.9, 0.0], np.float32)
    assert sample(row, st)[0] == 0
    assert sample(row, st)[0] == 1           # 0 was generated once: 1.0 - 1.5 < 0.9
    rep = SamplerState(SamplingParams(temperature=0.0, repetition_penalty=2.0), [0])
    assert sample(row, rep)[0] == 1          # 0 is in the prompt: 1.0 / 2 < 0.9


def test_same_seed_same_draws_and_logprobs():
    row = np.linspace(0, 3, 50).astype(np.float32)
    a = [sample(row, s)[0] for s in [SamplerState(SamplingParams(seed=5), [0])] for _ in range(20)]
    b = [sample(row, s)[0] for s in [SamplerState(SamplingParams(seed=5), [0])] for _ in range(20)]
    assert a == b
    st = SamplerState(SamplingParams(temperature=0.0, logprobs=3), [0])
    tok, lp, top = sample(row, st)
    assert tok == 49 and len(top) == 3 and top[0][0] == 49
    assert abs(np.exp([t[1] for t in top]).sum() - np.exp(row[-3:] - np.log(np.exp(row).sum())).sum()) < 1e-5
    assert lp == top[0][1] < 0


def test_nan_or_inf_logits_are_refused_and_minus_inf_is_a_mask():
    import pytest
    from server.engine.sampler import NonFiniteLogits
    for bad in (float("nan"), float("inf")):
        for temperature in (0.0, 0.7):
            st = SamplerState(SamplingParams(temperature=temperature, seed=1), [0])
            with pytest.raises(NonFiniteLogits, match="NaN or infinite"):
                sample(np.array([1.0, bad, 0.5], np.float32), st)
    st = SamplerState(SamplingParams(temperature=0.7, seed=1), [0])
    assert sample(np.array([-np.inf, 1.0, -np.inf], np.float32), st)[0] == 1


def test_the_smallest_repetition_penalty_the_api_takes_stays_finite():
    """0.01 (the API's floor) divides a large logit into a finite one; 1e-39 did not."""
    row = np.array([60.0, 59.0, -60.0], np.float32)
    st = SamplerState(SamplingParams(temperature=1e-5, seed=1, repetition_penalty=0.01), [0, 2])
    tok, _, _ = sample(row, st)
    assert tok == 0                          # in the prompt: 60 / 0.01 = 6000, x 1e5 still finite
