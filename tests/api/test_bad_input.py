"""Input that once gave a 500 (issue 16), and properties over numbers, strings, nesting
and sizes: every answer is a 4xx in OpenAI's shape or a 200, never a 5xx."""
import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings, strategies as st

from api_fakes import make_state
from server.api import create_app
from server.api.logthrottle import OncePerSecond

APP = create_app(make_state(max_body_bytes=1 << 20))
CLIENT = TestClient(APP)
PATHS = ["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"]


def post(path, raw: bytes):
    return CLIENT.post(path, content=raw, headers={"content-type": "application/json"})


def assert_shaped_4xx(r, param=None):
    assert 400 <= r.status_code < 500, (r.status_code, r.text)
    err = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    if param is not None:
        assert err["param"] == param, err


@pytest.mark.parametrize("raw, param", [
    (b'{"prompt": "x", "max_tokens": ' + b"9" * 5000 + b"}", None),
    (b'{"prompt": "a\\ud800"}', "prompt"),
    (b'{"prompt": ["\\udfff"]}', "prompt[0]"),
    (b'{"model": "\\ud800", "prompt": "x"}', "model"),
    (b'{"prompt": "x", "stop": ["\\ud800"]}', "stop[0]"),
    (b'{"prompt": "x", "\\ud800": 1}', None),
    (b'{"prompt": ' + b"[" * 1000 + b"]" * 1000 + b"}", None),
    (b'{"prompt": ' + b"[" * 100000 + b"]" * 100000 + b"}", None),
    (b'{"prompt": "x", "temperature": 0.8, "repetition_penalty": 5e-324}', "repetition_penalty"),
    (b'{"prompt": "x", "temperature": 0.8, "repetition_penalty": 1e-39}', "repetition_penalty"),
    (b'{"prompt": ""}', "prompt"),
    (b'\xff\xfe{}', None),
    (b'{"prompt": "a\x00b"}', None),
])
def test_completions_refusals(raw, param):
    assert_shaped_4xx(post("/v1/completions", raw), param)


@pytest.mark.parametrize("path, body, param", [
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "\ud800"}]},
     "messages[0].content"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"},
                                           {"role": "tool", "content": "42"}]},
     "messages[1].tool_call_id"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                              "top_logprobs": 2}, "top_logprobs"),
    ("/tokenize", {"prompt": "\ud800"}, "prompt"),
    ("/tokenize", {}, "prompt"),
])
def test_other_refusals(path, body, param):
    raw = json.dumps(body).encode()          # ensure_ascii: the surrogate travels as \\ud800
    assert_shaped_4xx(post(path, raw), param)


def test_a_tool_message_with_its_call_id_is_served():
    r = CLIENT.post("/v1/chat/completions", json={"max_tokens": 2, "messages": [
        {"role": "user", "content": "hi"}, {"role": "tool", "content": "42",
                                             "tool_call_id": "call_1"}]})
    assert r.status_code == 200, r.text


def test_a_prompt_sure_to_be_past_the_context_is_refused_before_tokenizing(monkeypatch):
    state = APP.state.foldserve
    calls = []
    monkeypatch.setattr(type(state.tokenizer), "encode",
                        lambda self, text, add_special_tokens=True: calls.append(1) or [5])
    r = CLIENT.post("/v1/completions", json={"prompt": "x" * 200_000})
    assert_shaped_4xx(r, "prompt")
    assert r.json()["error"]["code"] == "context_length_exceeded" and not calls


weird_text = st.text(st.characters(codec=None, categories=None), max_size=12) | st.sampled_from(
    ["\x00", "\ud800", "a\udfffb", "\ufffe", "\U0010ffff", "<|im_end|>"])
numbers = st.integers(-10**30, 10**30) | st.floats() | st.sampled_from(
    [5e-324, 1e-39, 1e308, -0.0, 2**63, 2**64, -2**63 - 1])


def nested(depth: int):
    return json.loads("[" * depth + "]" * depth) if depth < 500 else "deep"


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(PATHS), field=st.sampled_from(
    ["prompt", "model", "stop", "max_tokens", "temperature", "repetition_penalty", "top_p",
     "seed", "tokens", "messages", "logprobs", "top_logprobs"]),
    value=weird_text | numbers | st.integers(1, 400).map(nested) | st.lists(weird_text, max_size=3))
def test_any_value_in_any_field_is_never_a_5xx(path, field, value):
    body = {"prompt": "hi", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}
    if path == "/tokenize":
        body.pop("messages")
    body[field] = value
    raw = json.dumps(body, allow_nan=True).encode()
    r = post(path, raw)
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        assert_shaped_4xx(r)


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(PATHS), raw=st.binary(max_size=64).map(
    lambda b: b'{"prompt": "' + b + b'"}'))
def test_raw_bytes_in_a_string_are_never_a_5xx(path, raw):
    r = post(path, raw)
    assert r.status_code < 500, (r.status_code, r.text)


def test_the_connection_still_serves():
    r = CLIENT.post("/v1/completions", json={"prompt": "ok", "max_tokens": 2})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "He"


def test_floods_are_logged_once_a_second():
    import errno
    import logging
    clock = [0.0]
    f = OncePerSecond(clock=lambda: clock[0])

    def record(exc=None, msg="socket.accept() out of system resource"):
        return logging.LogRecord("asyncio", logging.ERROR, __file__, 1, msg, (),
                                 (type(exc), exc, None) if exc else None)
    emfile = OSError(errno.EMFILE, "Too many open files")
    passed = [f.filter(record(emfile)) for _ in range(1000)]
    assert passed.count(True) == 1
    clock[0] = 1.5
    r = record(emfile)
    assert f.filter(r) and "999 more like it held back" in r.getMessage()
    assert f.filter(record(msg="something else")) and f.filter(record(msg="something else"))
