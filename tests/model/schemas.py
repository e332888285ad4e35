"""A hypothesis strategy for JSON schemas: objects, arrays, enums, numbers with bounds,
strings with patterns, nested, required and optional; sized so a reply ends."""
from __future__ import annotations

import json

from hypothesis import strategies as st

NAMES = st.sampled_from(["a", "b", "name", "age", "tags", "x_1", "city", "ok"])


def _leaf():
    ints = st.tuples(st.integers(-50, 50), st.integers(0, 100)).map(
        lambda t: {"type": "integer", "minimum": t[0], "maximum": t[0] + t[1]})
    nums = st.tuples(st.integers(-10, 10), st.integers(1, 20)).map(
        lambda t: {"type": "number", "minimum": t[0], "maximum": t[0] + t[1]})
    strs = st.integers(1, 8).map(lambda n: {"type": "string", "maxLength": n})
    pats = st.sampled_from([r"^[a-z]{1,6}$", r"^[A-Z][a-z]{0,4}$", r"^[0-9]{2,4}-[0-9]{2}$",
                            r"^(red|green|blue)$"]).map(lambda p: {"type": "string", "pattern": p})
    enums = st.lists(st.one_of(st.sampled_from(["x", "y", "zz", "Paris"]), st.integers(0, 9)),
                     min_size=1, max_size=4, unique=True).map(lambda v: {"enum": v})
    bools = st.just({"type": "boolean"})
    return st.one_of(ints, nums, strs, pats, enums, bools)


def _grow(children):
    arrays = st.tuples(children, st.integers(0, 3)).map(
        lambda t: {"type": "array", "items": t[0], "maxItems": t[1]})
    objects = st.dictionaries(NAMES, children, min_size=1, max_size=3).flatmap(
        lambda props: st.sets(st.sampled_from(sorted(props)), max_size=len(props)).map(
            lambda req: {"type": "object", "properties": props, "required": sorted(req),
                         "additionalProperties": False}))
    return st.one_of(arrays, objects)


def schemas():
    """Top level: an object (as response_format json_schema takes it)."""
    inner = st.recursive(_leaf(), _grow, max_leaves=6)
    return st.dictionaries(NAMES, inner, min_size=1, max_size=4).flatmap(
        lambda props: st.sets(st.sampled_from(sorted(props)), max_size=len(props)).map(
            lambda req: {"type": "object", "properties": props, "required": sorted(req),
                         "additionalProperties": False}))


# A free string's character is at most 6 bytes (`\uXXXX`: the grammar counts an escape as
# one character; raw UTF-8 is 1-4). Keys, enum values and these patterns' characters come
# out literally, without escapes (the grammar allows none there); the patterns match at
# most these many characters.
_PATTERN_CHARS = {r"^[a-z]{1,6}$": 6, r"^[A-Z][a-z]{0,4}$": 5, r"^[0-9]{2,4}-[0-9]{2}$": 7,
                  r"^(red|green|blue)$": 5}


def max_reply_bytes(schema: dict) -> int:
    """The most bytes a reply following `schema` (one the strategy gives) can take, as the
    grammar writes JSON (", " and ": ", no other whitespace; numbers of at most
    grammar.FRACTION_DIGITS fraction digits). Every token is at least one byte, so a reply
    given this many tokens and one more (eos) ends unless the grammar lets it run."""
    from server.engine.grammar import FRACTION_DIGITS
    if "enum" in schema:
        return max(len(json.dumps(v)) for v in schema["enum"])
    t = schema["type"]
    if t == "object":
        props = schema["properties"]
        return 2 + 2 * (len(props) - 1) + sum(len(json.dumps(k)) + 2 + max_reply_bytes(v)
                                              for k, v in props.items())
    if t == "array":
        n = schema["maxItems"]
        return 2 + 2 * max(n - 1, 0) + n * max_reply_bytes(schema["items"])
    if t in ("integer", "number"):        # a sign, the integer digits, "." and the fraction
        digits = max(len(str(abs(int(schema[k])))) for k in ("minimum", "maximum"))
        return 1 + digits + (1 + FRACTION_DIGITS if t == "number" else 0)
    if t == "string":
        if "maxLength" in schema:
            return 2 + 6 * schema["maxLength"]
        return 2 + _PATTERN_CHARS[schema["pattern"]]
    if t == "boolean":
        return 5
    raise ValueError(f"max_reply_bytes does not know {schema}")
