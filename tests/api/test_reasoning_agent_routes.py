"""/v1/messages and /v1/responses with a reasoning parser active (a `<think>` template):
the reasoning is split off and not returned (those routes refuse `thinking` / `reasoning`),
never shown as text nor a 500; a forced tool call is constrained by the chat route's
grammar, which starts after the reasoning (the real tokenizer), and comes back as a call,
whole and streamed, also when cut by max_tokens."""
from __future__ import annotations

import anthropic
import openai
import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app

# Qwen3-style: the template mentions <think> (the parser is auto's "think")
QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")
THOUGHT = "<think>\nThe user greets; greet back.\n</think>\n\nHello there!"
HI = [{"role": "user", "content": "hi"}]
TOOL = {"name": "now", "description": "the time",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}}}
CALL_REPLY = ('<think>\nI need the time.\n</think>\n\n<tool_call>\n{"name": "now", '
              '"arguments": {"tz": "UTC"}}\n</tool_call>')


def fake_state(reply: str):
    sched = FakeScheduler(reply=reply, eos_after=len(reply.encode()))
    state = make_state(sched, context=4096)
    state.render_chat, state.chat_template, state.reasoning_parser = None, QWEN_LIKE, "auto"
    return sched, state


@pytest.fixture(scope="module")
def real_tok():
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        return Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))


def real_state(tok, reply: str, cut_at: int | None = None):
    ids = tok.encode(reply, add_special_tokens=False)
    if cut_at is not None:
        ids = ids[:cut_at]
    sched = FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1], eos_after=len(ids))
    state = make_state(sched, context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, QWEN_LIKE, "auto"
    return sched, state, ids


def follows(grammar, ids) -> bool:
    c = grammar.constraint()
    for t in ids:
        if not c.allowed(c.vocab)[t]:
            return False
        c.consume(t)
    return True


def anthropic_client(state) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url="http://testserver", api_key="x", max_retries=0,
                               http_client=TestClient(create_app(state)))


def openai_client(state) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", max_retries=0,
                         http_client=TestClient(create_app(state)))


def test_messages_drop_the_reasoning_whole_and_streamed():
    _, state = fake_state(THOUGHT)
    c = anthropic_client(state)
    r = c.messages.create(model="fake-model", max_tokens=200, messages=HI)
    assert [(b.type, b.text) for b in r.content] == [("text", "Hello there!")]
    assert r.stop_reason == "end_turn"
    with c.messages.stream(model="fake-model", max_tokens=200, messages=HI) as s:
        events = list(s)
        final = s.get_final_message()
    assert [(b.type, b.text) for b in final.content] == [("text", "Hello there!")]
    deltas = [e.delta.text for e in events if e.type == "content_block_delta"]
    assert "".join(deltas) == "Hello there!"


def test_responses_drop_the_reasoning_whole_and_streamed():
    _, state = fake_state(THOUGHT)
    c = openai_client(state)
    r = c.responses.create(model="fake-model", input="hi", max_output_tokens=200)
    assert [i.type for i in r.output] == ["message"] and r.output_text == "Hello there!"
    assert r.status == "completed"
    with c.responses.stream(model="fake-model", input="hi", max_output_tokens=200) as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert "".join(deltas) == "Hello there!" and final.output_text == "Hello there!"


def test_messages_forced_call_is_constrained_after_the_reasoning(real_tok):
    sched, state, ids = real_state(real_tok, CALL_REPLY)
    c = anthropic_client(state)
    r = c.messages.create(model="fake-model", max_tokens=200, messages=HI, tools=[TOOL],
                          tool_choice={"type": "any"})
    assert sched.started[-1].grammar is not None
    assert follows(sched.started[-1].grammar, ids)      # free reasoning, then the call
    assert [(b.type, b.name, b.input) for b in r.content] == [("tool_use", "now",
                                                               {"tz": "UTC"})]
    assert r.stop_reason == "tool_use"
    with c.messages.stream(model="fake-model", max_tokens=200, messages=HI, tools=[TOOL],
                           tool_choice={"type": "tool", "name": "now"}) as s:
        final = s.get_final_message()
    assert follows(sched.started[-1].grammar, ids)
    assert [(b.type, b.name, b.input) for b in final.content] == [("tool_use", "now",
                                                                   {"tz": "UTC"})]


def test_responses_forced_call_is_constrained_after_the_reasoning(real_tok):
    sched, state, ids = real_state(real_tok, CALL_REPLY)
    c = openai_client(state)
    tools = [{"type": "function", "name": "now", "parameters": TOOL["input_schema"]}]
    r = c.responses.create(model="fake-model", input="hi", max_output_tokens=200, tools=tools,
                           tool_choice="required")
    assert follows(sched.started[-1].grammar, ids)
    assert [(i.type, i.name, i.arguments) for i in r.output] == [
        ("function_call", "now", '{"tz": "UTC"}')]
    with c.responses.stream(model="fake-model", input="hi", max_output_tokens=200,
                            tools=tools, tool_choice="required") as s:
        final = s.get_final_response()
    assert [(i.type, i.name) for i in final.output] == [("function_call", "now")]


def test_a_forced_call_cut_by_max_tokens_is_still_a_call(real_tok):
    full = real_tok.encode(CALL_REPLY, add_special_tokens=False)
    _, state, ids = real_state(real_tok, CALL_REPLY, cut_at=len(full) - 6)
    r = anthropic_client(state).messages.create(
        model="fake-model", max_tokens=len(ids), messages=HI, tools=[TOOL],
        tool_choice={"type": "any"})
    assert r.stop_reason == "max_tokens"
    assert [(b.type, b.name) for b in r.content] == [("tool_use", "now")]
    r = openai_client(state).responses.create(
        model="fake-model", input="hi", max_output_tokens=len(ids), tool_choice="required",
        tools=[{"type": "function", "name": "now", "parameters": TOOL["input_schema"]}])
    assert r.status == "incomplete"
    assert [(i.type, i.name) for i in r.output] == [("function_call", "now")]
