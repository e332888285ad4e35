"""The round's masks at once (grammar.prepare_many: llguidance fills many matchers' rows on
its own threads) give the words of each matcher's own `prepare`, whatever the other rows:
streams at different points of different grammars, finished and errored ones among them."""
from __future__ import annotations

import numpy as np

from server.engine.grammar import compile_grammar, prepare_many
from server.engine.sampler import SamplerState, prepare_masks, sample
from server.requests import SamplingParams

SCHEMAS = [
    {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
     "required": ["a", "b"], "additionalProperties": False},
    {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    {"type": "object", "properties": {"n": {"type": "number", "minimum": -5, "maximum": 5}},
     "required": ["n"], "additionalProperties": True},         # open (closed is the default)
]


def streams(tok, n: int, steps: int):
    """n constrained streams, stream i walked i % steps tokens into its grammar (random
    logits, seeded), and a twin of each fed the same tokens."""
    out = []
    for i in range(n):
        g = compile_grammar(tok, "json_schema", SCHEMAS[i % len(SCHEMAS)])
        pair = [SamplerState(SamplingParams(temperature=1.0, seed=i, max_tokens=64), [1],
                             grammar=g, eos_ids=tok.eos_ids) for _ in range(2)]
        rng = np.random.default_rng(i)
        for _ in range(i % steps):
            if pair[0].done:
                break
            t, _, _ = sample(rng.standard_normal(tok.vocab_size).astype(np.float32) * 4, pair[0])
            if t in tok.eos_ids:
                break
            pair[1].record(t)
        out.append(pair)
    return out


def test_many_masks_at_once_equal_one_by_one(tok):
    pairs = streams(tok, 24, 9)
    prepare_masks([a for a, _ in pairs])                 # all at once
    for a, b in pairs:
        if a.constraint.done:
            continue
        b.prepare()                                      # its own matcher, alone
        assert a.constraint.words().tobytes() == b.constraint.words().tobytes()
        assert (a.constraint.allowed(tok.vocab_size) == b.constraint.allowed(tok.vocab_size)).all()
    assert sum(not a.constraint.done for a, _ in pairs) >= 20


def test_a_second_round_recomputes_after_consume(tok):
    pairs = streams(tok, 6, 3)
    prepare_many([a.constraint for a, _ in pairs])
    first = [a.constraint.words().tobytes() for a, _ in pairs]
    for (a, b), w in zip(pairs, first):                  # one more token each, both twins
        allowed = np.flatnonzero(a.constraint.allowed(tok.vocab_size))
        t = int(allowed[0])
        a.constraint.consume(t)
        b.constraint.consume(t)
    prepare_many([a.constraint for a, _ in pairs])
    changed = 0
    for (a, b), w in zip(pairs, first):
        b.prepare()
        assert a.constraint.words().tobytes() == b.constraint.words().tobytes()
        changed += a.constraint.words().tobytes() != w
    assert changed >= 1                                  # the masks moved with the parse
