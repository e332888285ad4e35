"""/v1/completions: whole and streamed replies, usage, stops, logprobs."""
import json

import pytest

from api_fakes import BOS, BYTE0, FakeScheduler, make_state
from server.api import create_app
from fastapi.testclient import TestClient


def sse_events(resp) -> list:
    lines = [l for l in resp.text.split("\n\n") if l]
    assert all(l.startswith("data: ") for l in lines), lines
    assert lines[-1] == "data: [DONE]"
    return [json.loads(l[6:]) for l in lines[:-1]]


def test_text_prompt_gives_text_and_usage(client, sched):
    r = client.post("/v1/completions", json={"model": "fake-model", "prompt": "hi",
                                              "max_tokens": 5, "temperature": 0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion" and body["id"].startswith("cmpl-")
    assert body["choices"][0]["text"] == "Hello"
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 5, "total_tokens": 8,
                             "prompt_tokens_details": {"cached_tokens": 0}}
    req = sched.started[0]
    assert req.prompt_ids == [BOS, BYTE0 + ord("h"), BYTE0 + ord("i")]
    assert req.params.temperature == 0.0 and req.params.max_tokens == 5


def test_token_id_prompt_and_list_of_one(client, sched):
    r = client.post("/v1/completions", json={"prompt": [5, 6, 7], "max_tokens": 1})
    assert r.status_code == 200 and sched.started[-1].prompt_ids == [5, 6, 7]
    r = client.post("/v1/completions", json={"prompt": ["hi"], "max_tokens": 1})
    assert r.status_code == 200 and len(sched.started[-1].prompt_ids) == 3
    r = client.post("/v1/completions", json={"prompt": [[9, 9]], "max_tokens": 1})
    assert r.status_code == 200 and sched.started[-1].prompt_ids == [9, 9]


def test_default_max_tokens_is_16(client, sched):
    client.post("/v1/completions", json={"prompt": "hi"})
    assert sched.started[-1].params.max_tokens == 16


def test_sampling_fields_reach_the_scheduler(client, sched):
    r = client.post("/v1/completions", json={
        "prompt": "x", "max_tokens": 2, "temperature": 0.7, "top_p": 0.9, "top_k": 40,
        "min_p": 0.05, "seed": 7, "presence_penalty": 0.5, "frequency_penalty": -0.5,
        "repetition_penalty": 1.1, "ignore_eos": True, "draft": False, "user": "u",
        "stop_token_ids": [2], "some_unknown_field": {"x": 1}})
    assert r.status_code == 200, r.text
    p = sched.started[-1].params
    assert (p.temperature, p.top_p, p.top_k, p.min_p, p.seed) == (0.7, 0.9, 40, 0.05, 7)
    assert (p.presence_penalty, p.frequency_penalty, p.repetition_penalty) == (0.5, -0.5, 1.1)
    assert p.ignore_eos and p.stop_token_ids == (2,)


def test_stream_chunks_usage_and_done(client):
    r = client.post("/v1/completions", json={"prompt": "hi", "max_tokens": 10, "stream": True,
                                              "stream_options": {"include_usage": True}})
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/event-stream")
    events = sse_events(r)
    text = "".join(c["choices"][0]["text"] for c in events if c["choices"])
    assert text == "Hello, wö"      # ö is two bytes; the 10th token completes it
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == []
    assert events[-1]["usage"]["completion_tokens"] == 10
    assert all(c["usage"] is None for c in events[:-1])


def test_stream_never_splits_utf8():
    sched = FakeScheduler(reply="你好")
    with TestClient(create_app(make_state(sched))) as c:
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 6, "stream": True})
    pieces = [e["choices"][0]["text"] for e in sse_events(r)]
    assert "".join(pieces) == "你好"
    assert all("\ufffd" not in p for p in pieces)


def test_stop_string_cuts_and_cancels(client, sched):
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 30, "stop": ", w"})
    body = r.json()
    assert body["choices"][0]["text"] == "Hello"
    assert body["choices"][0]["finish_reason"] == "stop"
    assert sched.started[-1].id in sched.cancelled


def test_stop_string_streamed_holds_back_partial_match(client, sched):
    r = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 30,
                                              "stop": ["wör"], "stream": True})
    events = sse_events(r)
    assert "".join(e["choices"][0]["text"] for e in events) == "Hello, "
    assert events[-1]["choices"][0]["finish_reason"] == "stop"


@pytest.mark.parametrize("inline_finish", [False, True])
def test_eos_finishes_with_stop_and_no_eos_text(inline_finish):
    sched = FakeScheduler(eos_after=3, inline_finish=inline_finish)
    with TestClient(create_app(make_state(sched))) as c:
        body = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 10}).json()
        assert body["choices"][0] == {"index": 0, "text": "Hel", "finish_reason": "stop",
                                      "logprobs": None}
        assert body["usage"]["completion_tokens"] == 4
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 10, "stream": True})
        events = sse_events(r)
        assert "".join(e["choices"][0]["text"] for e in events) == "Hel"
        assert events[-1]["choices"][0]["finish_reason"] == "stop"


def test_inline_finish_on_the_last_token():
    sched = FakeScheduler(inline_finish=True)
    with TestClient(create_app(make_state(sched))) as c:
        body = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 5}).json()
    assert body["choices"][0]["text"] == "Hello" and body["usage"]["completion_tokens"] == 5


def test_logprobs_shape(client, sched):
    body = client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2,
                                                 "logprobs": 2}).json()
    lp = body["choices"][0]["logprobs"]
    assert lp["tokens"] == ["H", "e"] and lp["token_logprobs"] == [-0.5, -0.5]
    assert lp["top_logprobs"][0] == {"H": -0.5, "I": -1.5}
    assert lp["text_offset"] == [0, 1]
    assert sched.started[-1].params.logprobs == 2


def test_cached_tokens_in_usage():
    sched = FakeScheduler(cached_tokens=2)
    with TestClient(create_app(make_state(sched))) as c:
        body = c.post("/v1/completions", json={"prompt": "abc", "max_tokens": 1}).json()
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 2}


def test_error_after_stream_opened_is_an_event_then_done():
    sched = FakeScheduler(fail_after=2)
    with TestClient(create_app(make_state(sched))) as c:
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 5, "stream": True})
    events = sse_events(r)
    assert events[-1]["error"]["message"] == "rank 1 is gone"
    assert set(events[-1]["error"]) == {"message", "type", "param", "code"}


def test_error_before_reply_keeps_its_status():
    sched = FakeScheduler(fail_after=0)
    with TestClient(create_app(make_state(sched))) as c:
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 5})
    assert r.status_code == 503 and r.json()["error"]["message"] == "rank 1 is gone"
