"""A hypothesis strategy for JSON schemas: objects, arrays, enums, numbers with bounds,
strings with patterns, nested, required and optional; sized so a reply ends."""
from __future__ import annotations

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
