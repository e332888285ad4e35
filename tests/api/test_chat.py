"""/v1/chat/completions: template rendering, content parts, streaming deltas."""
from api_fakes import BYTE0, FakeScheduler, make_state
from fastapi.testclient import TestClient
from server.api import create_app
from test_completions import sse_events


def prompt_text(req) -> str:
    return bytes(i - BYTE0 for i in req.prompt_ids).decode()


def test_messages_go_through_the_template(client, sched):
    r = client.post("/v1/chat/completions", json={"model": "fake-model", "max_tokens": 5,
        "messages": [{"role": "system", "content": "be brief"},
                     {"role": "user", "content": "hi"},
                     {"role": "assistant", "content": "yo"},
                     {"role": "user", "content": [{"type": "text", "text": "a"},
                                                  {"type": "text", "text": "b"}]}]})
    assert r.status_code == 200, r.text
    assert prompt_text(sched.started[0]) == "<system>be brief\n<user>hi\n<assistant>yo\n<user>ab\n<assistant>"
    body = r.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Hello"}
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5
    assert body["usage"]["prompt_tokens"] == len(sched.started[0].prompt_ids)


def test_default_max_tokens_is_the_rest_of_the_context(client, sched):
    client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
    req = sched.started[0]
    assert req.params.max_tokens == 256 - len(req.prompt_ids)


def test_max_completion_tokens_wins(client, sched):
    client.post("/v1/chat/completions", json={"max_tokens": 7, "max_completion_tokens": 3,
                                              "messages": [{"role": "user", "content": "hi"}]})
    assert sched.started[0].params.max_tokens == 3


def test_stream_role_first_then_content_finish_usage(client):
    r = client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True}})
    events = sse_events(r)
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert events[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    content = "".join(e["choices"][0]["delta"].get("content", "") for e in events[1:-2])
    assert content == "Hello"
    assert events[-2]["choices"][0] == {"index": 0, "delta": {}, "logprobs": None,
                                        "finish_reason": "length"}
    assert events[-1]["choices"] == [] and events[-1]["usage"]["total_tokens"] > 5


def test_chat_logprobs_shape(client, sched):
    body = client.post("/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1,
        "logprobs": True, "top_logprobs": 2}).json()
    entry = body["choices"][0]["logprobs"]["content"][0]
    assert entry["token"] == "H" and entry["logprob"] == -0.5 and entry["bytes"] == [72]
    assert [t["token"] for t in entry["top_logprobs"]] == ["H", "I"]
    assert sched.started[0].params.logprobs == 2


def test_default_template_from_the_text_layer():
    """Without a render_chat override the tokenizer's template (or ChatML) renders."""
    sched = FakeScheduler()
    state = make_state(sched)
    state.render_chat = None
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                 "max_tokens": 1})
    assert r.status_code == 200, r.text
    assert prompt_text(sched.started[0]) == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_broken_template_is_a_400():
    state = make_state()
    state.render_chat = None
    state.tokenizer.chat_template = "{% for m in messages %}{{ raise_exception('no system') }}{% endfor %}"
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
    assert r.status_code == 400 and "no system" in r.json()["error"]["message"]
