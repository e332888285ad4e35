"""A JSON reply cannot run to max_tokens inside a number or in whitespace, whatever the model
prefers (server/engine/grammar.py: bound_numbers, JSON_OPTIONS).

The "model" here is adversarial and has no weights: at each step it takes an allowed token
of digits (or a point) if there is one (or of whitespace, for the whitespace test), as a small model
stuck on `10.0000...` does; else eos once the grammar accepts; else a closing bracket; else
the lowest allowed id. Through the grammar engine and the real tokenizer alone (no forward
pass), each walk must end within a few dozen tokens with JSON that validates, and no run of
digits may pass the bounds (INT_DIGITS before the point, FRACTION_DIGITS after it). The
raw llguidance schema (unbounded) is walked too, to show the walk would catch the bug.
"""
from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest

from server.engine.grammar import (FRACTION_DIGITS, INT_DIGITS, JSON_OPTIONS, Constraint,
                                   bound_numbers, compile_grammar, ll_tokenizer)

STEPS = 120


@pytest.fixture(scope="module")
def kinds(tok):
    """Token ids by what they decode to: digits (or "."), whitespace, closing brackets."""
    text = [tok.decode([i]) for i in range(tok.vocab_size)]
    digits = np.array([t != "" and set(t) <= set("0123456789.") for t in text])
    spaces = np.array([t != "" and t.isspace() for t in text])
    closers = np.array([t != "" and set(t) <= set("]}") for t in text])
    return digits, spaces, closers


def ids(tok, text: str) -> list[int]:
    return tok.hf.encode(text, add_special_tokens=False).ids


def walk(tok, constraint: Constraint, prefer: np.ndarray, closers: np.ndarray,
         prefix: str = "") -> tuple[str, bool]:
    """-> (text, ended): the adversarial walk from `prefix` (fed first)."""
    out = ids(tok, prefix)
    for t in out:
        constraint.consume(t)
    eos = sorted(tok.eos_ids)
    for _ in range(STEPS):
        if constraint.done:
            return tok.decode(out), True
        allowed = constraint.allowed(tok.vocab_size)
        pick = np.flatnonzero(allowed & prefer)[-1:]     # among digits "9" ("0" ends an int)
        if len(pick) == 0 and any(allowed[e] for e in eos):
            return tok.decode(out), True
        if len(pick) == 0:
            pick = np.flatnonzero(allowed & closers)
        if len(pick) == 0:
            pick = np.flatnonzero(allowed)
        assert len(pick), f"nothing allowed after {tok.decode(out)!r}"
        t = int(pick[0])
        constraint.consume(t)
        out.append(t)
    return tok.decode(out), False


def obj(prop: dict) -> dict:
    return {"type": "object", "properties": {"x": prop}, "required": ["x"],
            "additionalProperties": False}


NUMBERS = [
    # the e2e failure: an array of one number in [7, 10], written 10.0000... to max_tokens
    {"type": "array", "items": {"type": "number", "minimum": 7, "maximum": 10}, "minItems": 1,
     "maxItems": 1},
    {"type": "number"},
    {"type": "integer"},
    {"type": "number", "minimum": 0},
    {"type": "integer", "maximum": -5},
    {"type": ["number", "null"]},
    {"type": "number", "exclusiveMaximum": 3.5},
    {"anyOf": [{"type": "number", "minimum": 1}, {"type": "string", "maxLength": 2}]},
]


def digit_runs(text: str) -> tuple[int, int]:
    """The longest run of digits before a point (or alone), and after one."""
    whole = max((len(m) for m in re.findall(r"(?<![.\d])\d+", text)), default=0)
    frac = max((len(m) for m in re.findall(r"(?<=\.)\d+", text)), default=0)
    return whole, frac


@pytest.mark.parametrize("prop", NUMBERS, ids=lambda p: json.dumps(p)[:40])
def test_a_digit_loving_model_ends_every_number(tok, kinds, prop):
    digits, _, closers = kinds
    schema = obj(prop)
    text, ended = walk(tok, compile_grammar(tok, "json_schema", schema).constraint(),
                       digits, closers, prefix='{"x": ')
    assert ended, text
    jsonschema.validate(json.loads(text), schema)
    whole, frac = digit_runs(text)
    assert whole <= INT_DIGITS and frac <= FRACTION_DIGITS, text
    assert whole + frac >= 10, text          # the walk did go for the digits


def test_the_unbounded_grammar_runs_and_the_walk_sees_it(tok, kinds):
    """Without bound_numbers the same walk never leaves the number: the test above bites."""
    import llguidance
    digits, _, closers = kinds
    raw = {**obj(NUMBERS[0]), "x-guidance": JSON_OPTIONS}
    m = llguidance.LLMatcher(ll_tokenizer(tok), llguidance.LLMatcher.grammar_from_json_schema(raw),
                             log_level=0)
    text, ended = walk(tok, Constraint(m, tok.vocab_size), digits, closers, prefix='{"x": [')
    assert not ended and digit_runs(text)[1] > 3 * FRACTION_DIGITS, text


def test_json_object_and_tool_arguments_bound_their_numbers(tok, kinds):
    from server.api.tools import call_grammar
    digits, _, closers = kinds
    text, ended = walk(tok, compile_grammar(tok, "json_object", None).constraint(), digits,
                       closers, prefix='{"a": [1.')
    assert ended and isinstance(json.loads(text), dict), text
    assert digit_runs(text)[1] == FRACTION_DIGITS, text
    tools = [{"type": "function", "function": {"name": "f", "parameters": obj({"type": "number"})}}]
    g = compile_grammar(tok, "lark", call_grammar(tools, many=False))
    text, ended = walk(tok, g.constraint(), digits, closers,
                       prefix='<tool_call>\n{"name": "f", "arguments": {"x": ')
    assert ended and text.endswith("</tool_call>"), text
    call = json.loads(text.removeprefix("<tool_call>\n").removesuffix("\n</tool_call>"))
    assert digit_runs(json.dumps(call["arguments"]))[0] == INT_DIGITS, text


def test_a_space_loving_model_gets_no_whitespace_but_the_separators(tok, kinds):
    """With JSON_OPTIONS the only whitespace is the one space of ", " and ": ": a walk
    that takes whitespace whenever it may writes json.dumps's own spacing, never two."""
    _, spaces, closers = kinds
    schema = {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9},
              "minItems": 2, "maxItems": 2},
        "b": {"type": "object", "properties": {"c": {"type": "boolean"}}, "required": ["c"],
              "additionalProperties": False}},
        "required": ["a", "b"], "additionalProperties": False}
    for kind, spec, prefix in (("json_schema", schema, ""), ("json_object", None, ""),
                               ("json_object", None, '{"a": [1, {"b": true}')):
        text, ended = walk(tok, compile_grammar(tok, kind, spec).constraint(), spaces, closers,
                           prefix)
        assert ended, text
        assert text == json.dumps(json.loads(text)), text
        assert "  " not in text and "\n" not in text, text
    text, _ = walk(tok, compile_grammar(tok, "json_schema", schema).constraint(), spaces,
                   closers)
    jsonschema.validate(json.loads(text), schema)


def test_bound_numbers_only_narrows():
    B = 10 ** INT_DIGITS - 1
    s = {"type": "object", "properties": {
        "n": {"type": "number"}, "i": {"type": "integer", "minimum": 3},
        "m": {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": 2},
        "e": {"type": "number", "enum": [1.123456789012]}, "c": {"type": "integer", "const": 7},
        "t": {"type": ["string", "integer"]},
        "low": {"type": "number", "maximum": -1e20}, "high": {"type": "integer", "minimum": 1e18},
        "no": {"not": {"type": "number", "maximum": 1}}, "iff": {"if": {"type": "integer"}}},
        "$defs": {"d": {"type": "number"}}, "items": [{"type": "integer"}],
        "x-guidance": {"whitespace_flexible": True}}
    b = bound_numbers(s)
    p = b["properties"]
    assert p["n"] == {"type": "number", "minimum": -B, "maximum": B, "multipleOf": 1e-10}
    assert p["i"] == {"type": "integer", "minimum": 3, "maximum": B}
    assert p["m"] == {"type": "number", "multipleOf": 0.5, "exclusiveMaximum": 2, "minimum": -B}
    assert p["e"] == s["properties"]["e"] and p["c"] == s["properties"]["c"]
    assert p["t"] == {"type": ["string", "integer"], "minimum": -B, "maximum": B}
    assert p["low"]["minimum"] < -1e20 and p["high"]["maximum"] > 1e18
    assert p["no"] == s["properties"]["no"] and p["iff"] == s["properties"]["iff"]
    assert b["$defs"]["d"]["maximum"] == B and b["items"][0]["minimum"] == -B
    assert b["x-guidance"] == s["x-guidance"]
    assert s["properties"]["n"] == {"type": "number"}      # the caller's schema is untouched


def test_bound_numbers_leaves_odd_schemas_to_the_engine():
    """Malformed parts pass through untouched: llguidance, not a TypeError here, names them."""
    odd = {"type": ["number", {"a": 1}], "properties": [1], "items": True, "anyOf": "x"}
    b = bound_numbers(odd)
    assert {k: b[k] for k in odd} == odd and b["maximum"] == 10 ** INT_DIGITS - 1
    assert bound_numbers(True) is True and bound_numbers([1]) == [1]
