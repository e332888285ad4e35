"""Property: whatever the body, /v1/messages, /v1/messages/count_tokens and /v1/responses
never answer a 5xx, their errors keep their API's shape, and their streams end as their
API ends them."""
import json

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings, strategies as st

from api_fakes import make_state
from server.api import create_app

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**40, 2**40) |
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=10)

text = st.text(max_size=12)
schema = st.sampled_from([{"type": "object", "properties": {"a": {"type": "string"}}}, {},
                          {"type": "object"}, {"type": "nope"}])
block = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": text}),
    st.fixed_dictionaries({"type": st.just("tool_use"), "id": text, "name": text,
                           "input": st.dictionaries(text, text, max_size=2)}),
    st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": text,
                           "content": text | st.lists(st.fixed_dictionaries(
                               {"type": st.just("text"), "text": text}), max_size=2)},
                          optional={"is_error": st.booleans()}),
    st.fixed_dictionaries({"type": st.sampled_from(["image", "thinking", "document"])}))
item = st.one_of(
    st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "developer",
                                                    "tool"]),
                           "content": text | st.lists(st.fixed_dictionaries({
                               "type": st.sampled_from(["input_text", "output_text",
                                                        "input_image"]), "text": text}),
                               max_size=2)}),
    st.fixed_dictionaries({"type": st.just("function_call"), "call_id": text, "name": text,
                           "arguments": st.sampled_from(['{"a": "b"}', "{}", "[1]", "{"])}),
    st.fixed_dictionaries({"type": st.just("function_call_output"), "call_id": text,
                           "output": text}),
    st.fixed_dictionaries({"type": st.sampled_from(["reasoning", "item_reference"])}))

sensible = {
    "model": st.sampled_from(["fake-model", "other"]),
    "messages": st.lists(st.fixed_dictionaries({
        "role": st.sampled_from(["user", "assistant", "system"]),
        "content": text | st.lists(block, max_size=3)}), max_size=3),
    "system": text | st.lists(st.fixed_dictionaries({"type": st.just("text"), "text": text}),
                              max_size=2),
    "max_tokens": st.integers(-2, 300), "max_output_tokens": st.integers(-2, 300),
    "temperature": st.floats(-1, 3), "top_p": st.floats(-0.5, 1.5), "top_k": st.integers(-3, 50),
    "stop_sequences": st.lists(st.text(max_size=3), max_size=3), "stream": st.booleans(),
    "tools": st.lists(st.one_of(
        st.fixed_dictionaries({"name": st.sampled_from(["f", "g", "bad name"]),
                               "input_schema": schema}),
        st.fixed_dictionaries({"type": st.just("function"), "name": st.sampled_from(["f", "g"]),
                               "parameters": schema}),
        st.fixed_dictionaries({"type": st.sampled_from(["web_search", "bash_20250124"])})),
        max_size=2),
    "tool_choice": st.sampled_from(["auto", "none", "required", {"type": "auto"},
                                    {"type": "any"}, {"type": "tool", "name": "f"},
                                    {"type": "function", "name": "g"}, {"type": "none"}]),
    "input": text | st.lists(item, max_size=3),
    "instructions": text, "previous_response_id": st.sampled_from(["resp_x", ""]),
    "store": st.booleans(), "text": st.sampled_from([
        {"format": {"type": "json_object"}}, {"format": {"type": "text"}},
        {"format": {"type": "json_schema", "name": "x", "schema": {"type": "object"}}}]),
    "thinking": st.sampled_from([{"type": "disabled"}, {"type": "enabled", "budget_tokens": 9}]),
    "metadata": st.dictionaries(text, text, max_size=2),
}
bodies = st.dictionaries(st.sampled_from(sorted(sensible)), json_values, max_size=6) | \
    st.fixed_dictionaries({}, optional={k: v | json_values for k, v in sensible.items()})
paths = st.sampled_from(["/v1/messages", "/v1/messages/count_tokens", "/v1/responses"])

# bodies near valid ones, so the fuzz reaches templates, tool plans and the streams
turn = st.fixed_dictionaries({"role": st.just("user"),
                              "content": text | st.lists(block, min_size=1, max_size=2)})
near = {k: sensible[k] for k in ("system", "stop_sequences", "stream", "tools", "tool_choice",
                                 "temperature", "top_p", "thinking", "metadata", "instructions",
                                 "store", "text")}
near_bodies = st.tuples(st.just("/v1/messages"), st.fixed_dictionaries(
    {"max_tokens": st.integers(1, 20), "messages": st.lists(turn, min_size=1, max_size=2)},
    optional=near)) | st.tuples(st.just("/v1/responses"), st.fixed_dictionaries(
        {"input": sensible["input"], "max_output_tokens": st.integers(1, 20)}, optional=near))

CLIENT = TestClient(create_app(make_state(max_body_bytes=4096)))


def check(path: str, r):
    assert r.status_code < 500, (r.status_code, r.text)
    anthropic = path.startswith("/v1/messages")
    if r.status_code >= 400:
        body = r.json()
        if anthropic:
            assert body["type"] == "error" and set(body["error"]) == {"type", "message"}, body
        else:
            assert set(body["error"]) == {"message", "type", "param", "code"}, body
    elif r.headers["content-type"].startswith("text/event-stream"):
        last = [line for line in r.text.splitlines() if line.startswith("event: ")][-1]
        assert last in (("event: message_stop", "event: error") if anthropic else
                        ("event: response.completed", "event: response.incomplete",
                         "event: response.failed")), r.text[-300:]


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=paths, body=bodies)
def test_json_bodies_never_5xx(path, body):
    check(path, CLIENT.post(path, content=json.dumps(body).encode(),
                            headers={"content-type": "application/json"}))


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=near_bodies)
def test_near_valid_bodies_never_5xx(case):
    path, body = case
    check(path, CLIENT.post(path, json=body))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=paths, raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_junk_bodies_never_5xx(path, raw):
    check(path, CLIENT.post(path, content=raw, headers={"content-type": "application/json"}))
