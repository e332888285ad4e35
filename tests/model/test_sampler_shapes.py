"""logit_bias and min_tokens in the host sampler, and that shaped streams never take the
plain-greedy or device-sampled shortcuts (which would skip them on GPU rounds)."""
from __future__ import annotations

import numpy as np

from server.engine.sampler import SamplerState, sample
from server.requests import SamplingParams

V = 64


def row(best: int = 5) -> np.ndarray:
    r = np.linspace(-1, 1, V).astype(np.float32)
    r[best] = 10.0
    return r


def test_minus_100_removes_and_plus_100_forces():
    st = SamplerState(SamplingParams(temperature=0.0, logit_bias=((5, -100.0),)), [1])
    assert sample(row(5), st)[0] != 5
    for seed in range(20):
        st = SamplerState(SamplingParams(temperature=1.5, seed=seed, logit_bias=((9, 100.0),)), [1])
        assert sample(row(5), st)[0] == 9
    for seed in range(20):      # sampled: the banned token never comes out
        st = SamplerState(SamplingParams(temperature=2.0, seed=seed, logit_bias=((5, -100.0),)), [1])
        assert sample(row(5), st)[0] != 5


def test_min_tokens_masks_eos_and_stop_tokens_until_reached():
    p = SamplingParams(temperature=0.0, min_tokens=3, stop_token_ids=(7,))
    st = SamplerState(p, [1], eos_ids={5})
    r = row(5)
    r[7] = 9.0
    got = [sample(r, st)[0] for _ in range(4)]
    assert 5 not in got[:3] and 7 not in got[:3] and got[3] == 5


def test_logprobs_are_the_raw_ones():
    p = SamplingParams(temperature=0.0, logprobs=0, logit_bias=((9, 100.0),))
    tok, lp, _ = sample(row(5), SamplerState(p, [1]))
    r = row(5).astype(np.float64)
    assert tok == 9 and abs(lp - (r[9] - np.log(np.exp(r).sum()))) < 1e-4


def test_shaped_streams_take_no_shortcut():
    for p in (SamplingParams(temperature=0.0, logit_bias=((1, 1.0),)),
              SamplingParams(temperature=0.7, min_tokens=2),
              SamplingParams(temperature=0.7, logit_bias=((1, 1.0),))):
        st = SamplerState(p, [1])
        assert st.shaped and not st.plain_greedy and not st.device_inputs()["plain"]
    assert SamplerState(SamplingParams(temperature=0.0), [1]).plain_greedy
