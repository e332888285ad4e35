"""Reasoning replies through the official `openai` client: `<think>` text split into
reasoning_content (and vLLM's alias reasoning), whole and streamed; include_reasoning,
reasoning_format, --reasoning-parser none; reasoning_effort and enable_thinking reaching
the template; a grammar that applies after the reasoning (the real tokenizer)."""
from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient

from api_fakes import BYTE0, FakeScheduler, make_state
from server.api import create_app
from server.text.reasoning import ReasoningStream, resolve_parser, split

# Qwen3-style: the template mentions <think> (the reply opens it itself)
QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")
# DeepSeek-R1-style: the generation prompt opens <think> (the reply starts inside)
R1_LIKE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}{% endfor %}"
    "{% if add_generation_prompt %}<|Assistant|><think>\n{% endif %}")
EFFORT = ("{% for m in messages %}{{ m['content'] }}{% endfor %}"
          "[effort={{ reasoning_effort | default('unset') }}]<think>")

MSGS = [{"role": "user", "content": "hi"}]
THOUGHT = "<think>\nThe user greets; greet back.\n</think>\n\nHello there!"


def state_for(template: str, reply: str, parser: str = "auto", **kw):
    sched = FakeScheduler(reply=reply, eos_after=len(reply.encode()), **kw)
    state = make_state(sched, context=4096)
    state.render_chat, state.chat_template, state.reasoning_parser = None, template, parser
    return sched, state


def client(state) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key="x", max_retries=0,
                         http_client=TestClient(create_app(state)))


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


def streamed(c, **kw):
    reasoning, alias, content, finish = "", "", "", None
    for ch in c.chat.completions.create(model="fake-model", messages=MSGS, stream=True, **kw):
        d = ch.choices[0].delta
        extra = d.model_extra or {}
        reasoning += extra.get("reasoning_content") or ""
        alias += extra.get("reasoning") or ""
        content += d.content or ""
        finish = ch.choices[0].finish_reason or finish
    return reasoning, alias, content, finish


def test_think_reply_is_split_whole_and_streamed():
    _, state = state_for(QWEN_LIKE, THOUGHT)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200)
    msg = r.choices[0].message
    assert msg.content == "Hello there!"
    assert msg.model_extra["reasoning_content"] == "The user greets; greet back.\n"
    assert msg.model_extra["reasoning"] == msg.model_extra["reasoning_content"]
    assert r.choices[0].finish_reason == "stop"
    assert streamed(c, max_tokens=200) == ("The user greets; greet back.\n",
                                           "The user greets; greet back.\n", "Hello there!",
                                           "stop")


def test_a_template_that_opens_think_starts_the_reply_inside():
    sched, state = state_for(R1_LIKE, "Short thought.</think>\n\nAnswer.")
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200)
    assert prompt_text(sched.started[0]).endswith("<think>\n")
    assert r.choices[0].message.content == "Answer."
    assert r.choices[0].message.model_extra["reasoning_content"] == "Short thought."
    assert streamed(c, max_tokens=200)[::2] == ("Short thought.", "Answer.")


def test_a_reply_cut_inside_its_reasoning_is_reasoning_alone():
    _, state = state_for(R1_LIKE, "Thinking on and on and on")
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=10)
    assert r.choices[0].finish_reason == "length"
    assert r.choices[0].message.content is None
    assert r.choices[0].message.model_extra["reasoning_content"] == "Thinking o"
    assert streamed(c, max_tokens=10) == ("Thinking o", "Thinking o", "", "length")


def test_include_reasoning_false_drops_it():
    _, state = state_for(QWEN_LIKE, THOUGHT)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200,
                                  extra_body={"include_reasoning": False})
    msg = r.choices[0].message
    assert msg.content == "Hello there!" and "reasoning_content" not in (msg.model_extra or {})
    assert streamed(c, max_tokens=200, extra_body={"include_reasoning": False}) == \
        ("", "", "Hello there!", "stop")


@pytest.mark.parametrize("how", ["flag", "reasoning_format"])
def test_parser_none_keeps_the_text_raw(how):
    _, state = state_for(QWEN_LIKE, THOUGHT, parser="none" if how == "flag" else "auto")
    extra = {"reasoning_format": "none"} if how == "reasoning_format" else {}
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200,
                                  extra_body=extra)
    assert r.choices[0].message.content == THOUGHT
    assert "reasoning_content" not in (r.choices[0].message.model_extra or {})


def test_a_template_without_think_has_no_parser():
    """SmolLM2's kind of template: auto resolves to none, the reply stays content."""
    _, state = state_for("{% for m in messages %}{{ m['content'] }}{% endfor %}", THOUGHT)
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200)
    assert r.choices[0].message.content == THOUGHT


def test_reasoning_effort_and_enable_thinking_reach_the_template():
    sched, state = state_for(EFFORT, "x")
    c = client(state)
    c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=1,
                              reasoning_effort="low")
    assert prompt_text(sched.started[-1]) == "hi[effort=low]<think>"
    sched, state = state_for(QWEN_LIKE, "x")
    c = client(state)
    c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=1,
                              extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert prompt_text(sched.started[-1]).endswith("assistant\n<think>\n\n</think>\n\n")


def test_bad_reasoning_fields_are_400s_naming_them():
    _, state = state_for(QWEN_LIKE, "x")
    with TestClient(create_app(state)) as c:
        for field, value in (("reasoning_effort", "extreme"), ("include_reasoning", "no"),
                             ("reasoning_format", "other")):
            r = c.post("/v1/chat/completions", json={"messages": MSGS, field: value})
            assert r.status_code == 400 and r.json()["error"]["param"] == field, r.text


def test_resolve_parser():
    assert resolve_parser("auto", QWEN_LIKE) == "think"
    assert resolve_parser("auto", "{{ messages }}") is None
    assert resolve_parser("auto", None, "Qwen3-8B-Q4_K_M") == "think"
    assert resolve_parser("deepseek_r1", None) == "think"
    assert resolve_parser("none", QWEN_LIKE) is None
    with pytest.raises(ValueError):
        resolve_parser("bogus", None)


@pytest.mark.parametrize("text", [THOUGHT, "no thinking here", "  <thi", "<think>cut", "<think></think>",
                                  "\n<think>a</thi</think> b</think>c", ""])
@pytest.mark.parametrize("inside", [False, True])
@pytest.mark.parametrize("step", [1, 2, 5])
def test_streamed_split_joins_to_the_whole(text, inside, step):
    s = ReasoningStream(inside)
    parts = []
    for i in range(0, len(text), step):
        parts += s.push(text[i:i + step])
    parts += s.finish()
    r = "".join(t for p, t in parts if p == "reasoning") or None
    c = "".join(t for p, t in parts if p == "content") or None
    assert (r, c) == split(text, inside)


def test_split_cases():
    assert split(THOUGHT, False) == ("The user greets; greet back.\n", "Hello there!")
    assert split("plain", False) == (None, "plain")
    assert split("plain", True) == ("plain", None)
    assert split("<think>\n\n</think>\n\nHi", False) == (None, "Hi")


# --- the grammar after the reasoning: the real tokenizer ---

@pytest.fixture(scope="module")
def real_tok():
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        return Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))


def real_state(tok, reply: str, parser: str = "auto"):
    ids = tok.encode(reply, add_special_tokens=False)
    sched = FakeScheduler(reply_ids=ids + sorted(tok.eos_ids)[:1], eos_after=len(ids))
    state = make_state(sched, context=4096)
    state.tokenizer = tok
    state.render_chat, state.chat_template, state.reasoning_parser = None, QWEN_LIKE, parser
    return sched, state, ids


def follows(grammar, ids) -> bool:
    c = grammar.constraint()
    for t in ids:
        if not c.allowed(c.vocab)[t]:
            return False
        c.consume(t)
    return True


SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


def test_json_schema_applies_after_the_reasoning(real_tok):
    reply = '<think>\nThe user wants {"a": ...}; a=1.\n</think>\n\n{"a": 1}'
    sched, state, ids = real_state(real_tok, reply)
    c = client(state)
    r = c.chat.completions.create(
        model="fake-model", messages=MSGS, max_tokens=200,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}})
    msg = r.choices[0].message
    assert json.loads(msg.content) == {"a": 1}
    assert msg.model_extra["reasoning_content"] == 'The user wants {"a": ...}; a=1.\n'
    assert follows(sched.started[0].grammar, ids)         # free reasoning, then the schema
    # the same reply without a reasoning parser breaks the grammar at its first token
    sched, state, ids = real_state(real_tok, reply, parser="none")
    client(state).chat.completions.create(
        model="fake-model", messages=MSGS, max_tokens=200,
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}})
    assert not follows(sched.started[0].grammar, ids[:1])


def test_forced_tool_call_applies_after_the_reasoning(real_tok):
    tools = [{"type": "function", "function": {"name": "now", "parameters": {
        "type": "object", "properties": {}}}}]
    reply = '<think>\nI need the time.\n</think>\n\n<tool_call>\n{"name": "now", "arguments": {}}\n</tool_call>'
    sched, state, ids = real_state(real_tok, reply)
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200,
                                              tools=tools, tool_choice="required")
    msg = r.choices[0].message
    assert msg.model_extra["reasoning_content"] == "I need the time.\n"
    assert [(t.function.name, t.function.arguments) for t in msg.tool_calls] == [("now", "{}")]
    assert msg.content is None and r.choices[0].finish_reason == "tool_calls"
    assert follows(sched.started[0].grammar, ids)


# --- usage: the reasoning's tokens (one byte a token here) ---

@pytest.mark.parametrize("template,reply,thought", [
    (QWEN_LIKE, THOUGHT, "<think>\nThe user greets; greet back.\n</think>"),
    (R1_LIKE, "Short thought.</think>\n\nAnswer.", "Short thought.</think>"),
    (R1_LIKE, "Thinking on and on", "Thinking on and on"),
    (QWEN_LIKE, "No thinking here.", ""),
    (QWEN_LIKE, "<thinking is a word> here", "")])
def test_usage_counts_the_reasoning_tokens(template, reply, thought):
    """completion_tokens_details.reasoning_tokens: the tokens from the opening marker
    through the closing one, whole and streamed; the Responses route's usage the same."""
    _, state = state_for(template, reply)
    c = client(state)
    r = c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200)
    assert r.usage.completion_tokens == len(reply.encode()) + 1        # and the eos
    assert r.usage.completion_tokens_details.reasoning_tokens == len(thought.encode())
    last = list(c.chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200,
                                          stream=True, stream_options={"include_usage": True}))[-1]
    assert last.usage.completion_tokens_details.reasoning_tokens == len(thought.encode())
    resp = c.responses.create(model="fake-model", input="Hi", max_output_tokens=200)
    assert resp.usage.output_tokens_details.reasoning_tokens == len(thought.encode())


def test_usage_has_no_reasoning_count_without_a_parser():
    _, state = state_for(QWEN_LIKE, THOUGHT, parser="none")
    r = client(state).chat.completions.create(model="fake-model", messages=MSGS, max_tokens=200)
    assert r.usage.completion_tokens_details is None
