"""/v1/messages and /v1/messages/count_tokens with the official `anthropic` client against a
real uvicorn over the fake scheduler: whole and streamed replies, system prompts, tools
(tool_use out, tool_use / tool_result back in), tool_choice, stop sequences, usage,
x-api-key and Bearer, and every error in Anthropic's shape."""
from __future__ import annotations

import json

import anthropic
import httpx
import pytest

from api_fakes import BYTE0, FakeScheduler, make_state
from server.api import create_app
from uvicorn_thread import serving

KEY = "k"
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [{"name": "get_weather", "description": "the weather in a city", "input_schema": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def live():
    sched = FakeScheduler()
    with serving(create_app(make_state(sched, context=4096, api_keys=(KEY,)))) as url:
        yield url, sched


@pytest.fixture
def server(live):
    url, sched = live
    sched.reply, sched.eos_after, sched.fail_after = "Hello, wörld! 你好. ".encode(), None, None
    sched.started.clear()
    return url, sched


def client(url, **kw) -> anthropic.Anthropic:
    kw.setdefault("api_key", KEY)
    return anthropic.Anthropic(base_url=url, max_retries=0, **kw)


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


def test_whole_reply_and_usage(server):
    url, sched = server
    r = client(url).messages.create(model="fake-model", max_tokens=5, messages=HI)
    assert r.type == "message" and r.role == "assistant" and r.id.startswith("msg_")
    assert [b.type for b in r.content] == ["text"] and r.content[0].text == "Hello"
    assert r.stop_reason == "max_tokens" and r.stop_sequence is None
    assert r.usage.output_tokens == 5
    assert r.usage.input_tokens == len(sched.started[-1].prompt_ids)
    assert r.usage.cache_read_input_tokens == 0


def test_end_turn_and_stop_sequence(server):
    url, sched = server
    sched.eos_after = 3
    r = client(url).messages.create(model="fake-model", max_tokens=50, messages=HI)
    assert r.content[0].text == "Hel" and r.stop_reason == "end_turn"
    sched.eos_after = None
    r = client(url).messages.create(model="fake-model", max_tokens=50, messages=HI,
                                    stop_sequences=["zz", "wö"])
    assert r.content[0].text == "Hello, " and r.stop_reason == "stop_sequence"
    assert r.stop_sequence == "wö"
    assert sched.started[-1].params.max_tokens == 50


def test_system_prompt_string_and_blocks_and_sampling(server):
    url, sched = server
    c = client(url)
    c.messages.create(model="fake-model", max_tokens=2, messages=HI, system="be brief",
                      extra_body={"temperature": 0.5, "top_p": 0.9, "top_k": 7})
    assert prompt_text(sched.started[-1]) == "<system>be brief\n<user>hi\n<assistant>"
    p = sched.started[-1].params
    assert (p.temperature, p.top_p, p.top_k) == (0.5, 0.9, 7)
    c.messages.create(model="fake-model", max_tokens=2, messages=[
        {"role": "user", "content": [{"type": "text", "text": "a"},
                                     {"type": "text", "text": "b",
                                      "cache_control": {"type": "ephemeral"}}]}],
        system=[{"type": "text", "text": "s1"}, {"type": "text", "text": "s2"}])
    assert prompt_text(sched.started[-1]) == "<system>s1s2\n<user>ab\n<assistant>"


def test_stream_events_parse_into_the_same_message(server):
    url, sched = server
    with client(url).messages.stream(model="fake-model", max_tokens=7, messages=HI) as s:
        text = "".join(s.text_stream)
        final = s.get_final_message()
    assert text == "Hello, " == final.content[0].text
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens == 7
    assert final.usage.input_tokens == len(sched.started[-1].prompt_ids)


def test_raw_stream_event_order(server):
    url, _ = server
    r = httpx.post(url + "/v1/messages", headers={"x-api-key": KEY}, json={
        "max_tokens": 3, "messages": HI, "stream": True})
    names = [line[7:] for line in r.text.splitlines() if line.startswith("event: ")]
    assert names == ["message_start", "content_block_start", "content_block_delta",
                     "content_block_delta", "content_block_delta", "content_block_stop",
                     "message_delta", "message_stop"]
    datas = [json.loads(line[6:]) for line in r.text.splitlines() if line.startswith("data: ")]
    assert [d["type"] for d in datas] == names


def test_tool_use_whole_and_streamed(server):
    url, sched = server
    sched.reply, sched.eos_after = CALL.encode(), len(CALL.encode())
    c = client(url)
    r = c.messages.create(model="fake-model", max_tokens=200, messages=HI, tools=TOOLS)
    assert r.stop_reason == "tool_use"
    assert [b.type for b in r.content] == ["tool_use"]
    use = r.content[0]
    assert use.name == "get_weather" and use.input == {"city": "Paris"}
    assert use.id.startswith("toolu_")
    # the tools reach the prompt (the fake template knows no tools: the fallback prompt)
    assert "get_weather" in prompt_text(sched.started[-1])

    with c.messages.stream(model="fake-model", max_tokens=200, messages=HI, tools=TOOLS) as s:
        events = [e.type for e in s]
        final = s.get_final_message()
    assert final.stop_reason == "tool_use" and final.content[0].input == {"city": "Paris"}
    assert "input_json" in events and "content_block_stop" in events


def test_tool_results_go_back_through_the_template(server):
    url, sched = server
    sched.eos_after = 2
    r = client(url).messages.create(model="fake-model", max_tokens=20, tools=TOOLS, messages=[
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
            {"type": "text", "text": "and?"}]}])
    assert r.content[0].text == "He"
    text = prompt_text(sched.started[-1])
    assert ('<assistant>Let me look.\n<tool_call>\n{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}\n</tool_call>\n') in text
    assert "<user><tool_response>\nsunny\n</tool_response>\n<user>and?\n<assistant>" in text


def test_tool_choice_maps_to_the_chat_plans(server, monkeypatch):
    url, sched = server
    sched.eos_after = 2
    compiled = []       # the fake tokenizer has no grammar engine: record what would compile
    monkeypatch.setattr("server.api.tools.compile_for",
                        lambda state, kind, spec, param, reasoning=None:
                        compiled.append(spec) or spec)
    c = client(url)
    c.messages.create(model="fake-model", max_tokens=20, messages=HI, tools=TOOLS,
                      tool_choice={"type": "none"})
    assert "get_weather" not in prompt_text(sched.started[-1])
    assert sched.started[-1].grammar is None and not compiled
    c.messages.create(model="fake-model", max_tokens=20, messages=HI, tools=TOOLS,
                      tool_choice={"type": "any"})
    assert sched.started[-1].grammar == compiled[-1]                 # the call is constrained
    assert "get_weather" in compiled[-1] and '("\\n" call)*' in compiled[-1]   # parallel
    c.messages.create(model="fake-model", max_tokens=20, messages=HI, tools=TOOLS,
                      tool_choice={"type": "any", "disable_parallel_tool_use": True})
    assert '("\\n" call)*' not in compiled[-1]                       # one call
    c.messages.create(model="fake-model", max_tokens=20, messages=HI, tools=TOOLS,
                      tool_choice={"type": "tool", "name": "get_weather"})
    assert sched.started[-1].grammar == compiled[-1] and len(compiled) == 3
    with pytest.raises(anthropic.BadRequestError) as e:
        c.messages.create(model="fake-model", max_tokens=20, messages=HI, tools=TOOLS,
                          tool_choice={"type": "tool", "name": "nope"})
    assert "nope" in e.value.body["error"]["message"]


def test_count_tokens_is_the_prompt_of_create(server):
    url, sched = server
    c = client(url)
    n = c.messages.count_tokens(model="fake-model", messages=HI, system="sys", tools=TOOLS)
    c.messages.create(model="fake-model", max_tokens=1, messages=HI, system="sys", tools=TOOLS)
    assert n.input_tokens == len(sched.started[-1].prompt_ids) > 50


def test_keys_x_api_key_and_bearer(server):
    url, _ = server
    r = client(url, api_key=None, auth_token=KEY).messages.create(
        model="fake-model", max_tokens=1, messages=HI)
    assert r.content[0].text == "H"
    with pytest.raises(anthropic.AuthenticationError) as e:
        client(url, api_key="wrong").messages.create(model="fake-model", max_tokens=1,
                                                     messages=HI)
    assert e.value.body == {"type": "error", "error": {
        "type": "authentication_error", "message": "Incorrect API key provided"}}
    r = httpx.post(url + "/v1/messages", json={"max_tokens": 1, "messages": HI})
    assert r.status_code == 401 and r.json()["error"]["type"] == "authentication_error"
    assert "x-api-key" in r.json()["error"]["message"]


@pytest.mark.parametrize("extra,names", [
    ({"foo": 1}, "foo"),
    ({"thinking": {"type": "enabled", "budget_tokens": 1024}}, "thinking"),
    ({"temperature": 1.5}, "temperature"),
    ({"messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                     "data": "AA=="}}]}]}, "messages[0].content[0].type"),
    ({"messages": [{"role": "user", "content": "hi", "name": "x"}]}, "messages[0].name"),
    ({"tools": [{"type": "bash_20250124", "name": "bash"}]}, "tools[0].type"),
    ({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Sure"}]},
     "messages"),
])
def test_refusals_name_the_field_in_anthropics_shape(server, extra, names):
    url, _ = server
    with pytest.raises(anthropic.BadRequestError) as e:
        client(url).messages.create(model="fake-model", max_tokens=5, messages=HI,
                                    extra_body=extra)
    body = e.value.body
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert body["error"]["type"] == "invalid_request_error"
    assert names in body["error"]["message"], body


def test_max_tokens_is_required_and_unknown_model_is_404(server):
    url, _ = server
    r = httpx.post(url + "/v1/messages", headers={"x-api-key": KEY}, json={"messages": HI})
    assert r.status_code == 400 and "max_tokens" in r.json()["error"]["message"]
    with pytest.raises(anthropic.NotFoundError) as e:
        client(url).messages.create(model="claude-nope", max_tokens=5, messages=HI)
    assert e.value.body["error"]["type"] == "not_found_error"
    r = httpx.get(url + "/v1/messages", headers={"x-api-key": KEY})
    assert r.status_code == 405 and r.json()["type"] == "error"


def test_an_error_inside_the_stream_is_an_error_event(server):
    url, sched = server
    sched.fail_after = 2
    with pytest.raises(anthropic.APIStatusError) as e:
        with client(url).messages.stream(model="fake-model", max_tokens=20, messages=HI) as s:
            s.get_final_message()
    assert e.value.body["error"]["type"] == "overloaded_error"
    assert "rank 1 is gone" in e.value.body["error"]["message"]


def test_a_long_conversation_is_validated_as_anthropics_messages():
    """Past request_checks.MESSAGES_AT_ONCE messages the body is validated a slice at a time;
    the slices are the route's own message model, not the chat route's."""
    from fastapi.testclient import TestClient

    from server.api.request_checks import MESSAGES_AT_ONCE
    sched = FakeScheduler()
    n = MESSAGES_AT_ONCE + 3
    msgs = [{"role": "user" if i % 2 == 0 else "assistant",
             "content": [{"type": "text", "text": str(i % 10)}]} for i in range(n)]
    msgs[-2]["content"].append({"type": "tool_use", "id": "t1", "name": "f", "input": {}})
    msgs[-1]["content"].insert(0, {"type": "tool_result", "tool_use_id": "t1", "content": "r"})
    with TestClient(create_app(make_state(sched, context=100_000))) as c:
        r = c.post("/v1/messages", json={"max_tokens": 1, "messages": msgs})
        assert r.status_code == 200, r.text
        assert prompt_text(sched.started[-1]).endswith(
            '<assistant>9\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>\n'
            "<user><tool_response>\nr\n</tool_response>\n<user>0\n<assistant>")
        bad = msgs[:-1] + [{"role": "user", "content": [{"type": "text"}]}]
        r = c.post("/v1/messages", json={"max_tokens": 1, "messages": bad})
        assert r.status_code == 400 and f"messages[{n - 1}].content" in r.text, r.text


def test_text_then_tool_use_are_two_blocks_whole_and_streamed(server):
    url, sched = server
    reply = "Let me see.\n" + CALL
    sched.reply, sched.eos_after = reply.encode(), len(reply.encode())
    c = client(url)
    r = c.messages.create(model="fake-model", max_tokens=200, messages=HI, tools=TOOLS)
    assert [b.type for b in r.content] == ["text", "tool_use"] and r.stop_reason == "tool_use"
    assert r.content[0].text == "Let me see.\n" and r.content[1].input == {"city": "Paris"}
    with c.messages.stream(model="fake-model", max_tokens=200, messages=HI, tools=TOOLS) as s:
        starts = [(e.index, e.content_block.type) for e in s if e.type == "content_block_start"]
        final = s.get_final_message()
    assert starts == [(0, "text"), (1, "tool_use")]
    def shape(m):       # the tool_use ids are each reply's own
        return [(b.type, getattr(b, "text", None), getattr(b, "input", None)) for b in m.content]
    assert shape(final) == shape(r) and final.stop_reason == "tool_use"


def test_the_body_limit_answers_in_anthropics_shape():
    from fastapi.testclient import TestClient
    with TestClient(create_app(make_state(FakeScheduler(), max_body_bytes=100))) as c:
        r = c.post("/v1/messages", json={"max_tokens": 1, "messages": [
            {"role": "user", "content": "x" * 200}]})
    assert r.status_code == 413
    assert r.json()["error"]["type"] == "request_too_large" and r.json()["type"] == "error"
    assert int(r.headers["content-length"]) == len(r.content)
