"""Constrained replies under harmony (gpt-oss): a forced tool_choice and structured outputs
as one grammar over the channel markup (server/api/harmony_constraint.py). The fake
scheduler replays a reply and keeps the grammar the request carried; the grammar must
take the reply's every token and then allow only a stop (`follows`), and refuse the
replies that break it. Both vocabularies: the markers as special tokens (gpt-oss's) and
as text (a vocabulary without them)."""
from __future__ import annotations

import json

import pytest

from api_fakes import FakeScheduler, default_tokenizer, make_state
from test_harmony import CALL, MSGS, TEMPLATE, TOOLS, client
from server.text.harmony import MARKERS

FINAL = "<|channel|>analysis<|message|>Give JSON.<|end|><|start|>assistant<|channel|>final<|message|>"
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
NOW = {"type": "function", "function": {"name": "now", "parameters": {"type": "object",
                                                                      "properties": {}}}}


@pytest.fixture(scope="module", params=["special", "text"])
def tok(request):
    return default_tokenizer(MARKERS if request.param == "special" else ())


def ask(tok, reply: str, **body):
    """-> (the reply's message, its finish reason, the request's grammar, the reply's ids)."""
    ids = tok.encode(reply, add_special_tokens=False)
    sched = FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1], eos_after=len(ids))
    state = make_state(sched, context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS,
                                              max_tokens=400, **body)
    return r.choices[0].message, r.choices[0].finish_reason, sched.started[0].grammar, ids


def follows(tok, grammar, reply: str) -> bool:
    """The grammar takes every token of the reply, and then a stop token and nothing else."""
    c = grammar.constraint()
    n = c.vocab
    for t in tok.encode(reply, add_special_tokens=False):
        if not c.allowed(n)[t]:
            return False
        c.consume(t)
    allowed = c.allowed(n)
    return bool(allowed[sorted(tok.eos_ids)].all()) and int(allowed.sum()) == len(tok.eos_ids)


@pytest.mark.parametrize("choice", ["required", {"type": "function",
                                                 "function": {"name": "get_weather"}}])
def test_a_forced_call_after_free_reasoning(tok, choice):
    msg, finish, g, _ = ask(tok, CALL, tools=TOOLS + [NOW], tool_choice=choice)
    assert [(t.function.name, json.loads(t.function.arguments)) for t in msg.tool_calls] == \
        [("get_weather", {"city": "Paris"})]
    assert msg.model_extra["reasoning_content"] == "Need the weather tool."
    assert msg.content is None and finish == "tool_calls"
    assert follows(tok, g, CALL)
    call_only = CALL[CALL.index("<|start|>assistant") + len("<|start|>assistant"):]
    assert follows(tok, g, call_only)                                  # no reasoning first
    assert not follows(tok, g, FINAL + "It is sunny.")                 # an answer, not a call
    assert not follows(tok, g, CALL.replace('"Paris"', "3"))           # args off the schema
    assert not follows(tok, g, CALL.replace("get_weather", "get_time"))   # an unknown tool
    if choice == "required":
        assert follows(tok, g, call_only.replace("get_weather", "now").replace('{"city": "Paris"}', "{}"))
    else:                                                              # the named one only
        assert not follows(tok, g, call_only.replace("get_weather", "now").replace('{"city": "Paris"}', "{}"))


def test_a_json_schema_in_the_final_channel(tok):
    reply = FINAL + '{"a": 1}'
    msg, finish, g, _ = ask(tok, reply, response_format={
        "type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}})
    assert json.loads(msg.content) == {"a": 1} and finish == "stop"
    assert msg.model_extra["reasoning_content"] == "Give JSON."
    assert follows(tok, g, reply)
    assert not follows(tok, g, FINAL + '{"a": "one"}')
    assert not follows(tok, g, FINAL + "Sure: " + '{"a": 1}')
    assert not follows(tok, g, CALL)


def test_json_object_and_choices_in_the_final_channel(tok):
    _, _, g, _ = ask(tok, FINAL + '{"b": [1]}', response_format={"type": "json_object"})
    assert follows(tok, g, FINAL + '{"b": [1]}') and not follows(tok, g, FINAL + "[1]")
    msg, _, g, _ = ask(tok, FINAL + "yes", extra_body={"guided_choice": ["yes", "no"]})
    assert msg.content == "yes"
    assert follows(tok, g, FINAL + "no") and not follows(tok, g, FINAL + "maybe")


@pytest.mark.parametrize("field", [{"guided_regex": "[a-z]+"}, {"grammar": 'root ::= "a"'}])
def test_a_regex_or_grammar_is_refused_by_name(tok, field):
    from fastapi.testclient import TestClient
    from server.api import create_app
    state = make_state(FakeScheduler(reply="x"), context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, TEMPLATE, "auto"
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/chat/completions", json={"messages": MSGS, **field})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == next(iter(field)) and "harmony" in r.json()["error"]["message"]
