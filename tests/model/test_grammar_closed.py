"""A json_schema object that lists its properties and says nothing of additionalProperties
is closed (llama.cpp's and vLLM's default): the grammar refuses a key the schema does not
list; `additionalProperties: true` opens it again."""
from __future__ import annotations

import pytest

from server.engine.grammar import close_objects, compile_grammar


def takes(tok, schema, text: str) -> bool:
    c = compile_grammar(tok, "json_schema", schema).constraint()
    for t in tok.encode(text, add_special_tokens=False):
        if not c.allowed(c.vocab)[t]:
            return False
        c.consume(t)
    return c.m.is_accepting()


POINT = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_objects_are_closed_by_default(tok):
    assert takes(tok, POINT, '{"a": 1}')
    assert not takes(tok, POINT, '{"a": 1, "b": 2}')
    nested = {"type": "array", "items": {"type": "object", "properties": {"p": POINT}}}
    assert takes(tok, nested, '[{"p": {"a": 1}}]')
    assert not takes(tok, nested, '[{"p": {"a": 1, "z": 0}}]')
    assert not takes(tok, nested, '[{"q": 1}]')


def test_additional_properties_true_opens_them(tok):
    assert takes(tok, {**POINT, "additionalProperties": True}, '{"a": 1, "b": 2}')
    assert takes(tok, {**POINT, "additionalProperties": {"type": "integer"}}, '{"a": 1, "b": 2}')
    assert takes(tok, {"type": "object"}, '{"b": 2}')       # no properties: nothing to close to


def test_all_of_members_stay_open():
    """Closing each member of an allOf would refuse the keys the others add."""
    s = {"allOf": [{"type": "object", "properties": {"a": {}}},
                   {"type": "object", "properties": {"b": {}}}]}
    assert close_objects(s) == s
    assert close_objects(POINT)["additionalProperties"] is False
    assert close_objects({"anyOf": [POINT]})["anyOf"][0]["additionalProperties"] is False
