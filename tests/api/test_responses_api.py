"""/v1/responses with the official `openai` client (and langchain-openai's
use_responses_api) against a real uvicorn over the fake scheduler: whole and streamed
responses (the client's own stream accumulator), instructions, function tools and
function_call / function_call_output items, previous_response_id and the bounded store,
text.format, refusals naming their field."""
from __future__ import annotations

import json

import httpx
import openai
import pytest

from api_fakes import BYTE0, FakeScheduler, make_state
from server.api import create_app
from server.api.response_store import ResponseStore
from uvicorn_thread import serving

CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [{"type": "function", "name": "get_weather", "description": "the weather",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}]


@pytest.fixture(scope="module")
def live():
    sched = FakeScheduler()
    app = create_app(make_state(sched, context=4096))
    with serving(app) as url:
        yield url, sched, app


@pytest.fixture
def server(live):
    url, sched, app = live
    sched.reply, sched.eos_after, sched.fail_after = "Hello, wörld! 你好. ".encode(), None, None
    sched.started.clear()
    return url, sched


def client(url) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="x", max_retries=0)


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


def test_whole_response_completed_and_incomplete(server):
    url, sched = server
    sched.eos_after = 3
    r = client(url).responses.create(model="fake-model", input="hi", instructions="be brief")
    assert r.object == "response" and r.id.startswith("resp_") and r.status == "completed"
    assert r.output_text == "Hel" and r.output[0].type == "message"
    assert r.output[0].content[0].type == "output_text"
    assert r.instructions == "be brief" and r.incomplete_details is None
    assert prompt_text(sched.started[-1]) == "<system>be brief\n<user>hi\n<assistant>"
    n = len(sched.started[-1].prompt_ids)
    assert (r.usage.input_tokens, r.usage.output_tokens, r.usage.total_tokens) == (n, 4, n + 4)
    assert r.usage.input_tokens_details.cached_tokens == 0

    sched.eos_after = None
    r = client(url).responses.create(model="fake-model", input="hi", max_output_tokens=5,
                                     temperature=0.5, top_p=0.5)
    assert r.status == "incomplete" and r.incomplete_details.reason == "max_output_tokens"
    assert r.output_text == "Hello" and r.max_output_tokens == 5
    p = sched.started[-1].params
    assert (p.max_tokens, p.temperature, p.top_p) == (5, 0.5, 0.5)


def test_stream_through_the_clients_accumulator(server):
    url, sched = server
    sched.eos_after = 7
    with client(url).responses.stream(model="fake-model", input="hi") as s:
        deltas = [e.delta for e in s if e.type == "response.output_text.delta"]
        final = s.get_final_response()
    assert "".join(deltas) == "Hello, " == final.output_text
    assert final.status == "completed" and final.usage.output_tokens == 8


def test_raw_stream_event_order(server):
    url, sched = server
    sched.eos_after = 2
    events = list(client(url).responses.create(model="fake-model", input="hi", stream=True))
    assert [e.type for e in events] == [
        "response.created", "response.in_progress", "response.output_item.added",
        "response.content_part.added", "response.output_text.delta",
        "response.output_text.delta", "response.output_text.done",
        "response.content_part.done", "response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    assert events[-1].response.output[0].content[0].text == "He"
    assert events[-1].response.usage.output_tokens == 3
    r = httpx.post(url + "/v1/responses", json={"input": "hi", "stream": True})
    names = [line[7:] for line in r.text.splitlines() if line.startswith("event: ")]
    assert names == [e.type for e in events]           # each event named by its type


def test_stream_cut_by_max_output_tokens_ends_incomplete(server):
    url, _ = server
    events = list(client(url).responses.create(model="fake-model", input="hi", stream=True,
                                               max_output_tokens=3))
    assert events[-1].type == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert events[-1].response.output[0].status == "incomplete"


def test_function_calls_out_and_back_in(server):
    url, sched = server
    sched.reply, sched.eos_after = CALL.encode(), len(CALL.encode())
    c = client(url)
    r = c.responses.create(model="fake-model", input="weather?", tools=TOOLS)
    assert [o.type for o in r.output] == ["function_call"]
    call = r.output[0]
    assert call.name == "get_weather" and json.loads(call.arguments) == {"city": "Paris"}
    assert call.call_id.startswith("call_") and call.status == "completed"
    assert r.tools[0].name == "get_weather" and r.tool_choice == "auto"

    with c.responses.stream(model="fake-model", input="weather?", tools=TOOLS) as s:
        kinds = [e.type for e in s]
        final = s.get_final_response()
    assert "response.function_call_arguments.delta" in kinds
    assert "response.function_call_arguments.done" in kinds
    assert json.loads(final.output[0].arguments) == {"city": "Paris"}

    sched.reply, sched.eos_after = b"Sunny.", 6
    r = c.responses.create(model="fake-model", tools=TOOLS, input=[
        {"role": "user", "content": "weather?"},
        {"type": "function_call", "call_id": call.call_id, "name": "get_weather",
         "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "sunny"}])
    assert r.output_text == "Sunny."
    text = prompt_text(sched.started[-1])
    assert ('<assistant><tool_call>\n{"name": "get_weather", "arguments": {"city": '
            '"Paris"}}\n</tool_call>\n<user><tool_response>\nsunny\n</tool_response>\n'
            '<assistant>') in text


def test_previous_response_id_continues_the_conversation(server):
    url, sched = server
    sched.eos_after = 2
    c = client(url)
    first = c.responses.create(model="fake-model", input="one", instructions="sys")
    second = c.responses.create(model="fake-model", input="two",
                                previous_response_id=first.id)
    assert second.previous_response_id == first.id
    # the earlier turn and its reply, without the earlier instructions (OpenAI's rule)
    assert prompt_text(sched.started[-1]) == "<user>one\n<assistant>He\n<user>two\n<assistant>"
    with c.responses.stream(model="fake-model", input="three",
                            previous_response_id=second.id) as s:
        third = s.get_final_response()
    fourth = c.responses.create(model="fake-model", input="four",
                                previous_response_id=third.id)
    assert prompt_text(sched.started[-1]) == (
        "<user>one\n<assistant>He\n<user>two\n<assistant>He\n<user>three\n<assistant>He\n"
        "<user>four\n<assistant>")
    assert fourth.status == "completed"

    unstored = c.responses.create(model="fake-model", input="x", store=False)
    for rid in ("resp_nope", unstored.id):
        with pytest.raises(openai.BadRequestError) as e:
            c.responses.create(model="fake-model", input="y", previous_response_id=rid)
        assert e.value.body["param"] == "previous_response_id"
        assert e.value.body["code"] == "previous_response_not_found"


def test_the_store_is_bounded():
    s = ResponseStore(max_responses=2, max_chars=1000)
    for i in range(3):
        s.put(f"r{i}", [{"role": "user", "content": str(i)}])
    assert s.get("r0") is None and s.get("r1") and s.get("r2") and len(s) == 2
    s.get("r1")                                       # used: r2 is now the oldest
    s.put("r3", [{"role": "user", "content": "x"}])
    assert s.get("r2") is None and s.get("r1") is not None
    s.put("big", [{"role": "user", "content": "x" * 600}])
    s.put("big2", [{"role": "user", "content": "y" * 600}])     # past the characters
    assert s.get("big") is None and s.get("big2") is not None
    s.put("huge", [{"role": "user", "content": "z" * 2000}])     # larger than the store
    assert s.get("huge") is None and s.get("big2") is not None


def test_text_format_json_schema_is_structured_output(server, monkeypatch):
    url, sched = server
    sched.eos_after = 2
    seen = []
    monkeypatch.setattr("server.api.structured.compile_for",
                        lambda state, kind, spec, param, reasoning=None:
                        seen.append((kind, spec, param)) or "g")
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    r = client(url).responses.create(model="fake-model", input="hi", text={"format": {
        "type": "json_schema", "name": "thing", "schema": schema, "strict": True}})
    assert seen == [("json_schema", schema, "response_format.json_schema.schema")]
    assert sched.started[-1].grammar == "g"
    assert r.text.format.type == "json_schema" and r.text.format.name == "thing"
    client(url).responses.create(model="fake-model", input="hi",
                                 text={"format": {"type": "json_object"}})
    assert seen[-1][0] == "json_object"


@pytest.mark.parametrize("extra,param", [
    ({"foo": 1}, "foo"),
    ({"reasoning": {"effort": "high"}}, "reasoning"),
    ({"truncation": "auto"}, "truncation"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
     "input[0].content[0].type"),
    ({"input": [{"type": "reasoning", "id": "r", "summary": []}]}, "input[0].type"),
    ({"tools": [{"type": "web_search"}]}, "tools[0].type"),
    ({"input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "[1"}]},
     "input[0].arguments"),
    ({"temperature": 3}, "temperature"),
])
def test_refusals_name_the_field(server, extra, param):
    url, _ = server
    body = {"input": "hi", **extra}
    r = httpx.post(url + "/v1/responses", json=body)
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param, r.text


def test_langchain_use_responses_api(server):
    langchain_openai = pytest.importorskip("langchain_openai")
    url, sched = server
    sched.eos_after = 5
    llm = langchain_openai.ChatOpenAI(model="fake-model", base_url=url + "/v1", api_key="x",
                                      use_responses_api=True, max_retries=0)
    msg = llm.invoke("hi")
    assert msg.text == "Hello" and msg.response_metadata["status"] == "completed"
    assert "".join(c.text for c in llm.stream("hi")) == "Hello"


def test_output_items_go_back_as_input_as_the_client_sends_them(server):
    """The usual loop: `input += response.output`, then the tool's output."""
    url, sched = server
    sched.reply, sched.eos_after = ("Let me see." + CALL).encode(), len(("Let me see." + CALL).encode())
    c = client(url)
    convo = [{"role": "user", "content": "weather?"}]
    r = c.responses.create(model="fake-model", input=convo, tools=TOOLS)
    assert [o.type for o in r.output] == ["message", "function_call"]
    call = r.output[1]
    sched.reply, sched.eos_after = b"Sunny.", 6
    r2 = c.responses.create(model="fake-model", tools=TOOLS, input=[
        *convo, *r.output, {"type": "function_call_output", "call_id": call.call_id,
                            "output": "sunny"}])
    assert r2.output_text == "Sunny.", r2
    assert ('<assistant>Let me see.\n<tool_call>\n{"name": "get_weather"'
            in prompt_text(sched.started[-1]))


def test_an_error_inside_the_stream_is_an_error_event_then_failed(server):
    url, sched = server
    sched.fail_after = 2
    events = list(client(url).responses.create(model="fake-model", input="hi", stream=True))
    assert [e.type for e in events][-2:] == ["error", "response.failed"]
    assert events[-2].code == "rank_lost" and "rank 1 is gone" in events[-2].message
    assert events[-1].response.status == "failed"
    assert events[-1].response.error.code == "rank_lost"
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_langchain_tool_calls_on_the_responses_api(server):
    langchain_openai = pytest.importorskip("langchain_openai")
    url, sched = server
    sched.reply, sched.eos_after = CALL.encode(), len(CALL.encode())

    def get_weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    llm = langchain_openai.ChatOpenAI(model="fake-model", base_url=url + "/v1", api_key="x",
                                      use_responses_api=True, max_retries=0)
    msg = llm.bind_tools([get_weather]).invoke("weather in Paris?")
    assert [(c["name"], c["args"]) for c in msg.tool_calls] == [("get_weather", {"city": "Paris"})]
