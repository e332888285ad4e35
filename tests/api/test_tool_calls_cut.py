"""Forced tool calls (tool_choice "required" or a named function) never leak markup into
content: a reply cut by max_tokens comes back as tool_calls (the cut one's arguments as
far as written) with finish_reason "length", whole and streamed, through the official
`openai` client. The replies are the real tokenizer's tokens, each one the call grammar
allows (checked), so they are replies the server can really produce."""
from __future__ import annotations

import openai
import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app

MSGS = [{"role": "user", "content": "what time is it?"}]
NOW = {"type": "function", "function": {"name": "now", "parameters": {
    "type": "object", "properties": {}}}}
WEATHER = {"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
CALL = '<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'
W_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.fixture(scope="module")
def real_tok():
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        return Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))


def serve(tok, reply: str):
    """A server whose every reply is `reply`'s tokens, then eos (max_tokens cuts it)."""
    ids = tok.encode(reply, add_special_tokens=False)
    sched = FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1], eos_after=len(ids))
    state = make_state(sched, context=4096)
    state.tokenizer, state.render_chat = tok, None
    c = openai.OpenAI(base_url="http://testserver/v1", api_key="x", max_retries=0,
                      http_client=TestClient(create_app(state)))
    return c, sched, ids


def allowed(grammar, ids) -> bool:
    c = grammar.constraint()
    for t in ids:
        if not c.allowed(c.vocab)[t]:
            return False
        c.consume(t)
    return True


def whole_and_streamed(c, **kw):
    r = c.chat.completions.create(model="fake-model", messages=MSGS, **kw)
    ch = r.choices[0]
    whole = (ch.message.content, [(t.function.name, t.function.arguments)
                                  for t in ch.message.tool_calls or []], ch.finish_reason)
    content, calls, finish = "", {}, None
    for chunk in c.chat.completions.create(model="fake-model", messages=MSGS, stream=True, **kw):
        d = chunk.choices[0].delta
        content += d.content or ""
        for t in d.tool_calls or []:
            slot = calls.setdefault(t.index, ["", ""])
            slot[0] += (t.function.name or "") if t.function else ""
            slot[1] += (t.function.arguments or "") if t.function else ""
        finish = chunk.choices[0].finish_reason or finish
    streamed = (content or None, [tuple(calls[i]) for i in sorted(calls)], finish)
    return whole, streamed


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "now"}}])
def test_a_cut_forced_call_is_a_tool_call(real_tok, choice):
    """The issue's reply: '<tool_call>\\n{"name": "now", "arguments": {}}\\n</' at max_tokens."""
    c, sched, ids = serve(real_tok, CALL)
    cut = len(real_tok.encode(CALL[:-len("tool_call>")], add_special_tokens=False))
    whole, streamed = whole_and_streamed(c, tools=[NOW, WEATHER], tool_choice=choice,
                                         max_tokens=cut)
    assert whole == streamed == (None, [("now", "{}")], "length")
    assert allowed(sched.started[0].grammar, ids[:cut])


def test_arguments_cut_halfway_come_back_as_written(real_tok):
    c, sched, ids = serve(real_tok, W_CALL)
    cut = len(real_tok.encode(W_CALL[:W_CALL.index("Paris") + 2], add_special_tokens=False))
    whole, streamed = whole_and_streamed(
        c, tools=[NOW, WEATHER], max_tokens=cut,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    (content, calls, finish) = whole
    assert content is None and finish == "length" and calls[0][0] == "get_weather"
    assert calls[0][1].startswith('{"city": "P') and '"Paris"' not in calls[0][1]
    assert streamed == whole
    assert allowed(sched.started[0].grammar, ids[:cut])


def test_a_named_call_cut_before_its_name_still_names_it(real_tok):
    c, sched, ids = serve(real_tok, W_CALL)
    whole, streamed = whole_and_streamed(
        c, tools=[NOW, WEATHER], max_tokens=1,
        tool_choice={"type": "function", "function": {"name": "get_weather"}})
    assert whole == streamed == (None, [("get_weather", "")], "length")


def test_parallel_required_cut_after_a_call_leaves_no_markup(real_tok):
    """parallel_tool_calls and "required": a whole call, then the next one's '<' at max_tokens."""
    reply = CALL + "\n" + CALL
    c, sched, ids = serve(real_tok, reply)
    cut = len(real_tok.encode(CALL + "\n<", add_special_tokens=False))
    whole, streamed = whole_and_streamed(c, tools=[NOW, WEATHER], tool_choice="required",
                                         parallel_tool_calls=True, max_tokens=cut)
    assert whole == streamed == (None, [("now", "{}")], "length")
    assert allowed(sched.started[0].grammar, ids[:cut])
    whole, streamed = whole_and_streamed(c, tools=[NOW, WEATHER], tool_choice="required",
                                         parallel_tool_calls=True, max_tokens=200)
    assert whole == streamed == (None, [("now", "{}"), ("now", "{}")], "tool_calls")


def test_required_cut_before_the_name_is_decided_gives_no_text(real_tok):
    c, sched, ids = serve(real_tok, W_CALL)
    cut = len(real_tok.encode('<tool_call>\n{"name": "', add_special_tokens=False))
    whole, streamed = whole_and_streamed(c, tools=[NOW, WEATHER], tool_choice="required",
                                         max_tokens=cut)
    assert whole == streamed == (None, [], "length")


def test_auto_cut_call_is_a_call_too(real_tok):
    """tool_choice auto: the text before the call stays content, the cut call is a call."""
    reply = "Checking. " + W_CALL
    c, sched, ids = serve(real_tok, reply)
    cut = len(real_tok.encode(reply[:reply.index("Paris")], add_special_tokens=False))
    whole, streamed = whole_and_streamed(c, tools=[NOW, WEATHER], max_tokens=cut)
    assert whole[0] == "Checking." and whole[1] == [("get_weather", '{"city": "')]
    assert whole[2] == "length"
    assert streamed[1:] == whole[1:] and streamed[0].strip() == "Checking."
