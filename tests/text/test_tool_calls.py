"""The tool-call parsers (Hermes/Qwen, Mistral, Llama JSON) and the streamed tool-call
deltas reassembling into the same calls as the whole-reply parse."""
from __future__ import annotations

import json

import pytest

from server.api.tools import ToolStream
from server.text.tool_calls import Call, parse

HERMES = ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
          '</tool_call>\n<tool_call>\n{"name": "get_time", "arguments": {"tz": "CET"}}\n</tool_call>')


def test_hermes():
    content, calls = parse(HERMES)
    assert content == "Let me check."
    assert calls == [Call("get_weather", '{"city": "Paris"}'), Call("get_time", '{"tz": "CET"}')]


def test_hermes_cut_last_call_is_dropped():
    content, calls = parse(HERMES[:-30])
    assert calls == [Call("get_weather", '{"city": "Paris"}')]


def test_mistral_and_llama():
    assert parse('[TOOL_CALLS][{"name": "f", "arguments": {"x": 1}}]')[1] == [Call("f", '{"x": 1}')]
    assert parse('{"name": "f", "parameters": {"x": 1}}')[1] == [Call("f", '{"x": 1}')]
    assert parse('<|python_tag|>{"name": "f", "parameters": {}}; {"name": "g", "parameters": {"a": "b;c"}}')[1] \
        == [Call("f", "{}"), Call("g", '{"a": "b;c"}')]


@pytest.mark.parametrize("text", ["just prose", '{"not": "a call"}', "<tool_call>\nnot json\n</tool_call>",
                                  "[TOOL_CALLS] nope"])
def test_text_that_is_no_call_stays_content(text):
    assert parse(text) == (text, [])


def reassemble(deltas):
    content, calls = "", {}
    for d in deltas:
        content += d.get("content", "")
        for c in d.get("tool_calls", []):
            slot = calls.setdefault(c["index"], {"name": "", "arguments": ""})
            if "id" in c:
                slot["id"] = c["id"]
            slot["name"] += c.get("function", {}).get("name", "")
            slot["arguments"] += c.get("function", {}).get("arguments", "")
    return content, [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("text", [HERMES, "plain text, no calls at all <tool", "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]",
                                  '{"name": "f", "parameters": {"q": "x"}}', "a <tool_call>\nbroken\n</tool_call> b"])
@pytest.mark.parametrize("step", [1, 3, 17])
def test_stream_reassembles_to_the_whole_parse(text, step):
    ts = ToolStream()
    deltas = []
    for i in range(0, len(text), step):
        deltas += ts.push(text[i:i + step])
    deltas += ts.finish()
    content, calls = reassemble(deltas)
    want_content, want_calls = parse(text)
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == \
        [(c.name, json.loads(c.arguments)) for c in want_calls]
    if want_calls:
        assert content.strip() == (want_content or "")
    else:
        assert content == text
    assert all(c["id"].startswith("call_") for c in calls)
