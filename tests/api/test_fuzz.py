"""Property: whatever the body, the answer is never a 5xx and the server keeps answering."""
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

# plausible values beside junk, so the fuzz also reaches generation
sensible = {
    "model": st.sampled_from(["fake-model", "other"]),
    "prompt": st.text(max_size=30) | st.lists(st.integers(0, 40000), max_size=8),
    "messages": st.lists(st.fixed_dictionaries({
        "role": st.sampled_from(["system", "user", "assistant", "tool", "x"]),
        "content": st.text(max_size=20) | st.lists(st.fixed_dictionaries(
            {"type": st.sampled_from(["text", "image_url"]), "text": st.text(max_size=5)}),
            max_size=2)}), max_size=3),
    "max_tokens": st.integers(-2, 300), "max_completion_tokens": st.integers(-2, 300),
    "temperature": st.floats(-1, 3), "top_p": st.floats(-0.5, 1.5), "top_k": st.integers(-3, 50),
    "min_p": st.floats(-1, 2), "seed": st.integers(-2**63, 2**63),
    "stop": st.text(max_size=3) | st.lists(st.text(max_size=3), max_size=3),
    "presence_penalty": st.floats(-3, 3), "frequency_penalty": st.floats(-3, 3),
    "repetition_penalty": st.floats(-1, 3), "stream": st.booleans(),
    "stream_options": st.fixed_dictionaries({"include_usage": st.booleans()}),
    "logprobs": st.booleans() | st.integers(-1, 25), "top_logprobs": st.integers(-1, 25),
    "n": st.integers(0, 3), "ignore_eos": st.booleans(), "draft": st.booleans(),
    "user": st.text(max_size=5), "echo": st.booleans(), "tokens": st.lists(st.integers(-5, 40000)),
    "add_special_tokens": st.booleans(),
}
bodies = st.dictionaries(st.sampled_from(sorted(sensible)), json_values, max_size=6) | \
    st.fixed_dictionaries({}, optional={k: v | json_values for k, v in sensible.items()})
paths = st.sampled_from(["/v1/completions", "/v1/chat/completions", "/tokenize", "/detokenize"])

APP = create_app(make_state(max_body_bytes=4096))
CLIENT = TestClient(APP)


def assert_alive():
    r = CLIENT.post("/v1/completions", json={"prompt": "ok", "max_tokens": 2})
    assert r.status_code == 200 and r.json()["choices"][0]["text"] == "He"


def check(r):
    assert r.status_code < 500, (r.status_code, r.text)
    if r.status_code >= 400:
        assert set(r.json()["error"]) == {"message", "type", "param", "code"}
    elif r.headers["content-type"].startswith("text/event-stream"):
        assert r.text.endswith("data: [DONE]\n\n")


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=paths, body=bodies)
def test_json_bodies_never_5xx(path, body):
    check(CLIENT.post(path, content=json.dumps(body).encode(),
                      headers={"content-type": "application/json"}))


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=paths, raw=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_junk_bodies_never_5xx(path, raw):
    check(CLIENT.post(path, content=raw, headers={"content-type": "application/json"}))


def test_still_answering_after_the_fuzz():
    assert_alive()
