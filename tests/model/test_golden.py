"""The CPU forward against the golden file: exact prompt ids, greedy ids under the rule,
first-step top-5 logits within 1e-3 relative."""
from __future__ import annotations

import numpy as np
import pytest

from server.generate import generate
from server.requests import SamplingParams
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep


def _cases(golden):
    return {c["name"]: c for c in golden["cases"]}


@pytest.mark.parametrize("name", ["capital", "count", "code", "chat-hello", "chat-gpu", "unicode", "long-story"])
def test_greedy_matches_golden(real_model, golden, name):
    case = _cases(golden)[name]
    ids = real_model.tokenizer.encode(case["text"], add_special_tokens=False)
    assert ids == case["prompt_ids"]
    n = case["exact_prefix"]
    out = generate(real_model, ids, SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    assert out[:n] == case["greedy_ids"][:n]


def test_first_step_top5_logits(real_model, golden):
    eng = real_model.engine
    eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
    for case in golden["cases"]:
        eng.apply(BeginStep(0, tuple(range(8))))
        logits = eng.apply(RoundStep((Chunk(0, 0, tuple(case["prompt_ids"]), True),)))[0]
        ref = case["top5"][0]
        got = logits[ref["ids"]]
        want = np.array(ref["logits"], dtype=np.float64)
        assert np.max(np.abs(got - want) / np.abs(want)) < 1e-3, case["name"]
        assert list(np.argsort(-logits, kind="stable")[:5]) == ref["ids"], case["name"]
