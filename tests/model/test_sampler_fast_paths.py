"""The host sampler's shortcuts (server/engine/sampler.py: top_ids, top_p_keep, no copy of an
unedited row, one-pass finiteness) draw the same tokens, logprobs and top logprobs as the
definition they replace, bit for bit: that definition is kept here as it was written (full
stable arg-sorts, a copy of every row), and both run the same requests on rows with ties,
-inf masks, a 151,936-id vocabulary and small ones."""
from __future__ import annotations

import numpy as np
import pytest

from server.engine import sampler as S
from server.engine.sampler import SamplerState, draw, top_ids, top_p_keep
from server.requests import SamplingParams


def ref_sample(row, st):
    """server/engine/sampler.sample as written before the shortcuts (1f8397c)."""
    p = st.params
    raw = np.asarray(row, dtype=np.float32)
    logits = S.penalise(raw.copy(), st)
    if st.shaped:
        logits = S.shape(logits, st)
    if np.isnan(logits).any() or np.isposinf(logits).any():
        raise S.NonFiniteLogits("x")
    if p.greedy or p.temperature < S.MIN_TEMPERATURE:
        tok = int(np.argmax(logits))
    else:
        z = logits / np.float32(p.temperature)
        keep = np.ones(z.shape, dtype=bool)
        if p.top_k and p.top_k < z.size:
            kth = np.partition(z, -p.top_k)[-p.top_k]
            keep &= z >= kth
        z = np.where(keep, z, -np.inf)
        probs = np.exp(z - z.max(), dtype=np.float64)
        probs /= probs.sum()
        if p.min_p > 0:
            probs = np.where(probs >= p.min_p * probs.max(), probs, 0.0)
        if p.top_p < 1.0:
            order = np.argsort(-probs, kind="stable")
            cum = np.cumsum(probs[order])
            cut = int(np.searchsorted(cum, p.top_p * cum[-1])) + 1
            mask = np.zeros_like(probs)
            mask[order[:cut]] = 1.0
            probs = probs * mask
        probs /= probs.sum()
        tok = int(st.rng.choice(probs.size, p=probs))
    st.record(tok)
    lp = top = None
    if p.logprobs is not None:
        ls = S._log_softmax(raw)
        lp = float(ls[tok])
        n = max(0, int(p.logprobs))
        if n:
            best = np.argsort(-ls, kind="stable")[:n]
            top = tuple((int(i), float(ls[i])) for i in best)
    return tok, lp, top or ()


def rows(vocab, n, seed, ties=False, masked=False):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, vocab)) * 3).astype(np.float32)
    if ties:                                    # few distinct values: ties everywhere
        x = np.round(x * 2) / 2
    if masked:
        x[:, rng.random(vocab) < 0.3] = -np.inf
    return x


CASES = [dict(temperature=0.0), dict(temperature=0.0, logprobs=5),
         dict(temperature=0.0, logprobs=0), dict(temperature=0.7, seed=3),
         dict(temperature=0.7, top_p=0.95, seed=4), dict(temperature=1.0, top_p=0.5, seed=5),
         dict(temperature=0.9, top_k=40, seed=6), dict(temperature=0.8, top_k=20, top_p=0.8,
                                                     min_p=0.05, logprobs=3, seed=7),
         dict(temperature=1.2, repetition_penalty=1.3, presence_penalty=0.5,
              frequency_penalty=0.2, logprobs=2, seed=8),
         dict(temperature=0.6, top_p=0.9, logit_bias=[(7, 5.0), (11, -100.0)], seed=9),
         dict(temperature=0.0, min_tokens=3, logprobs=4)]


@pytest.mark.parametrize("vocab,ties,masked", [(151936, False, False), (97, True, False),
                                               (4096, True, True), (50, False, True)])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_sample_draws_what_the_definition_draws(vocab, ties, masked, case):
    kw = CASES[case]
    n = 6 if vocab > 10000 else 40
    xs = rows(vocab, n, 100 + case, ties, masked)
    params = SamplingParams(max_tokens=1000, **kw)
    a = SamplerState(params, [1, 2, 3, 2], eos_ids=(0,))
    b = SamplerState(params, [1, 2, 3, 2], eos_ids=(0,))
    for x in xs:
        before = x.copy()
        got = S.sample(x, a)
        want = ref_sample(x, b)
        assert got == want
        assert np.array_equal(x, before, equal_nan=True)    # the row is never written


@pytest.mark.parametrize("vocab", [10, 97, 151936])
def test_top_ids_and_top_p_keep_equal_the_arg_sorts(vocab):
    rng = np.random.default_rng(vocab)
    for trial in range(12):
        x = (rng.standard_normal(vocab) * 2).astype(np.float32)
        if trial % 3 == 1:
            x = np.round(x)                         # ties
        if trial % 3 == 2:
            x[rng.random(vocab) < 0.5] = -np.inf
        for k in (1, 2, 5, 20, vocab - 1, vocab, vocab + 3):
            assert top_ids(x, k).tolist() == np.argsort(-x, kind="stable")[:k].tolist()
        probs = np.exp(x - x.max(), dtype=np.float64)
        probs /= probs.sum()
        if trial % 2:
            probs = np.where(probs >= 0.01 * probs.max(), probs, 0.0)
        for top_p in (0.0, 0.1, 0.5, 0.9, 0.95, 0.999999, 1 - 1e-16):
            order = np.argsort(-probs, kind="stable")
            cum = np.cumsum(probs[order])
            want = np.zeros_like(probs)
            want[order[:int(np.searchsorted(cum, top_p * cum[-1])) + 1]] = 1.0
            assert np.array_equal(top_p_keep(probs, top_p), want)


@pytest.mark.parametrize("vocab", [1000, 151936])
def test_top_p_keep_where_a_prefix_sum_meets_the_target(vocab):
    """Equal values: prefix sums land on top_p times the total within ulps (the band), so
    the whole row is sorted; a flat row whose top 4096 and 32768 fall short of top_p too;
    a peaked one cut inside its top 4096."""
    flat = np.exp(np.random.default_rng(1).standard_normal(vocab) * 0.1)
    peaked = np.exp(np.random.default_rng(2).standard_normal(vocab) * 6)
    for probs in (np.full(vocab, 1.0 / vocab), flat / flat.sum(), peaked / peaked.sum()):
        for top_p in (0.25, 0.5, 0.75, 0.95):
            order = np.argsort(-probs, kind="stable")
            cum = np.cumsum(probs[order])
            want = np.zeros_like(probs)
            want[order[:int(np.searchsorted(cum, top_p * cum[-1])) + 1]] = 1.0
            assert np.array_equal(top_p_keep(probs, top_p), want)


def test_draw_is_rng_choice():
    """The same tokens as numpy's Generator.choice from the same seeds, over dense and
    sparse (cut) distributions, and its errors where the mass is broken."""
    r = np.random.default_rng(5)
    for trial in range(600):
        n = int(r.integers(2, 3000))
        p = np.exp(r.standard_normal(n) * r.uniform(0.1, 5))
        if trial % 2:
            p[r.random(n) < 0.8] = 0.0
            p[int(r.integers(n))] = 1.0
        p /= p.sum()
        seed = int(r.integers(1 << 62))
        a, b = np.random.default_rng([seed, 1]), np.random.default_rng([seed, 1])
        for _ in range(4):
            assert draw(a, p) == int(b.choice(n, p=p))
    for broken in (np.array([0.5, np.nan, 0.5]), np.zeros(3)):
        with pytest.raises(ValueError):
            draw(np.random.default_rng(1), broken)


def test_non_finite_rows_are_refused_as_before():
    st = SamplerState(SamplingParams(max_tokens=5), [1])
    for bad in (np.nan, np.inf):
        x = np.zeros(50, np.float32)
        x[7] = bad
        with pytest.raises(S.NonFiniteLogits, match="1 of this request's 50 logits"):
            S.sample(x, st)
    x = np.full(50, -np.inf, np.float32)
    x[3] = 0.0                                  # -inf is a legal mask
    assert S.sample(x, st)[0] == 3
