"""/v1/completions with a list of prompts (each its own choices, index i * n + j, usage
summed); stream_options.continuous_usage_stats; /tokenize with tools and
return_token_strs; stop_token_ids outside the vocabulary refused naming the field."""
from __future__ import annotations

import json

import openai
import pytest
from fastapi.testclient import TestClient

from api_fakes import BOS, BYTE0, VOCAB, FakeScheduler, make_state
from server.api import create_app

COMP, CHAT = "/v1/completions", "/v1/chat/completions"


def sse(r) -> list:
    return [json.loads(line[6:]) for line in r.text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def client_for(sched=None, **kw) -> TestClient:
    return TestClient(create_app(make_state(sched or FakeScheduler(reply="ab"), context=4096,
                                            **kw)))


def prompt_of(req) -> bytes:
    return bytes(i - BYTE0 for i in req.prompt_ids if i >= BYTE0)


def test_a_list_of_prompts_gives_each_its_choices():
    sched = FakeScheduler(reply="ab")
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": ["one", "three"], "max_tokens": 2, "n": 2,
                               "echo": True, "seed": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [ch["index"] for ch in body["choices"]] == [0, 1, 2, 3]
    assert [ch["text"] for ch in body["choices"]] == ["oneab", "oneab", "threeab", "threeab"]
    assert [prompt_of(q) for q in sched.started] == [b"one", b"one", b"three", b"three"]
    assert [q.params.seed for q in sched.started] == [5, 6, 5, 6]
    # each prompt counted once, every choice's tokens summed
    assert body["usage"]["prompt_tokens"] == 4 + 6 and body["usage"]["completion_tokens"] == 8
    assert body["usage"]["total_tokens"] == 18


def test_token_id_prompts_and_the_openai_client():
    sched = FakeScheduler(reply="xy")
    with client_for(sched) as c:
        oc = openai.OpenAI(base_url="http://testserver/v1", api_key="x", http_client=c,
                           max_retries=0)
        r = oc.completions.create(model="fake-model", prompt=[[BOS, 10], [BOS, 11, 12]],
                                  max_tokens=2)
        assert [ch.index for ch in r.choices] == [0, 1]
        assert [q.prompt_ids for q in sched.started] == [[BOS, 10], [BOS, 11, 12]]
        chunks = list(oc.completions.create(model="fake-model", prompt=["a", "b", "c"],
                                            max_tokens=2, stream=True))
    texts: dict = {}
    for ch in chunks:
        for choice in ch.choices:
            texts[choice.index] = texts.get(choice.index, "") + choice.text
    assert texts == {0: "xy", 1: "xy", 2: "xy"}


def test_a_bad_prompt_in_the_list_is_named_and_starts_nothing():
    sched = FakeScheduler()
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": [[1, 2], [1, VOCAB + 5]], "max_tokens": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt[1]", r.text
        r = c.post(COMP, json={"prompt": ["ok", ""], "max_tokens": 2})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt[1]", r.text
    assert sched.started == []


def test_a_list_that_does_not_fit_releases_its_queue_places():
    sched = FakeScheduler()
    with client_for(sched) as c:
        state = c.app.state.foldserve
        r = c.post(COMP, json={"prompt": ["a", "x" * 4090], "max_tokens": 10})
        assert r.status_code == 400 and r.json()["error"]["code"] == "context_length_exceeded"
        assert state.backlog.waiting(0) == 0


@pytest.mark.parametrize("path", [COMP, CHAT])
def test_continuous_usage_stats_puts_usage_in_every_chunk(path):
    body = {"prompt": "hi"} if path == COMP else {"messages": [{"role": "user", "content": "hi"}]}
    with client_for() as c:
        r = c.post(path, json={**body, "max_tokens": 3, "stream": True, "stream_options": {
            "include_usage": True, "continuous_usage_stats": True}})
    events = sse(r)
    assert all(e.get("usage") for e in events), events
    counts = [e["usage"]["completion_tokens"] for e in events]
    assert counts == sorted(counts) and counts[-1] == 3
    assert events[-1]["choices"] == []


def test_tokenize_renders_the_chat_with_its_tools():
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}}}}]
    msgs = [{"role": "user", "content": "hi"}]
    with client_for() as c:
        plain = c.post("/tokenize", json={"messages": msgs}).json()
        with_tools = c.post("/tokenize", json={"messages": msgs, "tools": tools}).json()
        text = bytes(t - BYTE0 for t in with_tools["tokens"]).decode()
        assert with_tools["count"] > plain["count"] + 50 and '"get_weather"' in text
        # the same prompt a chat request with those tools gets
        c.post(CHAT, json={"messages": msgs, "tools": tools, "max_tokens": 1})
        assert c.app.state.foldserve.scheduler.started[-1].prompt_ids == with_tools["tokens"]
        r = c.post("/tokenize", json={"prompt": "hi", "tools": tools})
        assert r.status_code == 400 and r.json()["error"]["param"] == "tools"


def test_tokenize_return_token_strs():
    with client_for() as c:
        body = c.post("/tokenize", json={"prompt": "hé", "return_token_strs": True}).json()
    assert body["tokens"] == [BOS, BYTE0 + 104, BYTE0 + 0xC3, BYTE0 + 0xA9]
    assert body["token_strs"][:2] == ["<s>", "h"] and len(body["token_strs"]) == 4


def test_tokenize_return_token_strs_real_vocabulary():
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        tok = Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))
    state = make_state(FakeScheduler())
    state.tokenizer = tok
    with TestClient(create_app(state)) as c:
        body = c.post("/tokenize", json={"prompt": "hello world", "add_special_tokens": False,
                                         "return_token_strs": True}).json()
    assert body["token_strs"] == [tok.hf.id_to_token(t) for t in body["tokens"]]
    assert "Ġworld" in body["token_strs"]


@pytest.mark.parametrize("path", [COMP, CHAT])
def test_stop_token_ids_outside_the_vocabulary_are_a_400(path):
    body = {"prompt": "hi"} if path == COMP else {"messages": [{"role": "user", "content": "hi"}]}
    sched = FakeScheduler()
    with client_for(sched) as c:
        r = c.post(path, json={**body, "max_tokens": 2, "stop_token_ids": [5, VOCAB]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "stop_token_ids", r.text
    assert sched.started == []
