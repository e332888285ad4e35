"""Every refusal: the status, OpenAI's error shape, and the field it names."""
import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import ApiError, create_app

CHAT = "/v1/chat/completions"
COMP = "/v1/completions"
MSGS = [{"role": "user", "content": "hi"}]


def error_of(r, status: int) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"message", "type", "param", "code"}
    assert body["error"]["message"]
    return body["error"]


@pytest.mark.parametrize("body,param", [
    ({"prompt": "x", "temperature": "hot"}, "temperature"),
    ({"prompt": "x", "temperature": -0.1}, "temperature"),
    ({"prompt": "x", "temperature": 2.5}, "temperature"),
    ({"prompt": "x", "top_p": 0}, "top_p"),
    ({"prompt": "x", "top_p": 1.5}, "top_p"),
    ({"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ({"prompt": "x", "max_tokens": "5"}, "max_tokens"),
    ({"prompt": "x", "max_tokens": 2.5}, "max_tokens"),
    ({"prompt": "x", "top_k": -2}, "top_k"),
    ({"prompt": "x", "min_p": 1.5}, "min_p"),
    ({"prompt": "x", "presence_penalty": 3}, "presence_penalty"),
    ({"prompt": "x", "frequency_penalty": -3}, "frequency_penalty"),
    ({"prompt": "x", "repetition_penalty": 0}, "repetition_penalty"),
    ({"prompt": "x", "stream": "yes"}, "stream"),
    ({"prompt": "x", "stop": 5}, "stop"),
    ({"prompt": "x", "stop": [""]}, "stop"),
    ({"prompt": "x", "seed": "1"}, "seed"),
    ({"prompt": "x", "logprobs": 50}, "logprobs"),
    ({"prompt": "x", "n": 17}, "n"),
    ({"prompt": "x", "echo": True, "logprobs": 1, "stream": True}, "echo"),
    ({"prompt": "x", "prompt_logprobs": 1, "stream": True}, "prompt_logprobs"),
    ({"prompt": "x", "prompt_logprobs": 21}, "prompt_logprobs"),
    ({"prompt": "x", "prompt_logprobs": -1}, "prompt_logprobs"),
    ({"prompt": "x", "logit_bias": {"x": 1}}, "logit_bias"),
    ({"prompt": "x", "logit_bias": {"5": 101}}, "logit_bias.5"),
    ({"prompt": "x", "logit_bias": {"99999999": 1}}, "logit_bias"),
    ({"prompt": "x", "min_tokens": -1}, "min_tokens"),
    ({"prompt": "x", "mirostat": 2}, "mirostat"),
    ({"prompt": "x", "use_beam_search": True}, "use_beam_search"),
    ({"prompt": "x", "best_of": 3}, "best_of"),
    ({"prompt": "x", "stream_options": {"include_usage": "y"}}, "stream_options.include_usage"),
    ({"prompt": ""}, "prompt"),
    ({"prompt": []}, "prompt"),
    ({"prompt": ["a", ""]}, "prompt[1]"),              # several prompts: each checked
    ({"prompt": [1, -5]}, None),
    ({"prompt": [1, 99999999]}, "prompt"),
    ({"prompt": 12}, "prompt"),
    ({}, "prompt"),
])
def test_bad_completion_fields_are_400s(client, body, param):
    err = error_of(client.post(COMP, json=body), 400)
    assert err["type"] == "invalid_request_error"
    if param:
        assert err["param"] == param, err


@pytest.mark.parametrize("body,param", [
    ({"messages": []}, "messages"),
    ({"messages": "hi"}, "messages"),
    ({"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": "user", "content": 5}]}, None),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}]},
     "messages[0].content[0].type"),
    ({"messages": MSGS, "logprobs": 3}, "logprobs"),
    ({"messages": MSGS, "top_logprobs": 2}, "top_logprobs"),
    ({"messages": MSGS, "n": 400}, "n"),
    ({"messages": MSGS, "audio": {"voice": "x"}}, "audio"),
    ({"messages": MSGS, "functions": [{"name": "f"}]}, "functions"),
    ({"messages": MSGS, "modalities": ["text", "audio"]}, "modalities"),
    ({"messages": MSGS, "tool_choice": "required"}, "tool_choice"),
    ({"messages": MSGS, "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": MSGS, "max_completion_tokens": 0}, "max_completion_tokens"),
])
def test_bad_chat_fields_are_400s(client, body, param):
    err = error_of(client.post(CHAT, json=body), 400)
    if param:
        assert err["param"] == param, err


def test_n_message_is_clear(client):
    err = error_of(client.post(COMP, json={"prompt": "x", "n": 17}), 400)
    assert "n=17 is more than" in err["message"]


def test_plausible_unknown_fields_are_ignored_and_noop_values_pass(client):
    r = client.post(COMP, json={"prompt": "x", "max_tokens": 2, "top_a": 0.5, "mirostat": 0,
                                "typical_p": 1.0, "modalities": None, "best_of": 1})
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("raw", [b"{", b"[1,2]", b"", b"null", b"\xff\xfe", b'"str"'])
def test_malformed_bodies_are_400s(client, raw):
    error_of(client.post(COMP, content=raw, headers={"content-type": "application/json"}), 400)


def test_context_length_exceeded(client):
    err = error_of(client.post(COMP, json={"prompt": "x" * 100, "max_tokens": 200}), 400)
    assert err["code"] == "context_length_exceeded"
    assert err["message"] == ("This server's maximum context length is 256 tokens; the "
                              "prompt has 101 tokens and max_tokens asks for 200")
    err = error_of(client.post(CHAT, json={"messages": [{"role": "user", "content": "y" * 300}]}), 400)
    assert err["code"] == "context_length_exceeded"


def test_scheduler_check_refusal_is_passed_through():
    sched = FakeScheduler()
    sched.check_error = ApiError(400, "needs 40 pages, the pool has 32", param="max_tokens",
                                 code="context_length_exceeded")
    with TestClient(create_app(make_state(sched))) as c:
        err = error_of(c.post(COMP, json={"prompt": "x", "max_tokens": 5}), 400)
    assert err["code"] == "context_length_exceeded" and "40 pages" in err["message"]

    class Refused(ValueError):
        status, code, param = 400, "too_long", "prompt"
    sched.check_error = Refused("no room")
    with TestClient(create_app(make_state(sched))) as c:
        err = error_of(c.post(COMP, json={"prompt": "x"}), 400)
    assert (err["code"], err["param"], err["message"]) == ("too_long", "prompt", "no room")


def test_unknown_model_is_404_and_missing_model_is_fine(client):
    err = error_of(client.post(COMP, json={"prompt": "x", "model": "gpt-9"}), 404)
    assert err["code"] == "model_not_found" and err["param"] == "model"
    error_of(client.post(CHAT, json={"messages": MSGS, "model": "gpt-9"}), 404)
    error_of(client.get("/v1/models/gpt-9"), 404)
    assert client.post(COMP, json={"prompt": "x", "max_tokens": 1}).status_code == 200


def test_unknown_route_and_method_keep_the_shape(client):
    error_of(client.get("/v1/nothing"), 404)
    error_of(client.get("/v1/completions"), 405)


def test_api_key():
    with TestClient(create_app(make_state(api_keys=("sekrit",)))) as c:
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 1})
        err = error_of(r, 401)
        assert r.headers["www-authenticate"] == "Bearer" and err["code"] == "invalid_api_key"
        r = c.post(COMP, json={"prompt": "x"}, headers={"Authorization": "Bearer wrong"})
        error_of(r, 401)
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 1},
                   headers={"Authorization": "Bearer sekrit"})
        assert r.status_code == 200
        assert c.get("/health").status_code == 200          # probes need no key
        error_of(c.get("/v1/models"), 401)


def test_body_too_large():
    with TestClient(create_app(make_state(max_body_bytes=100))) as c:
        err = error_of(c.post(COMP, json={"prompt": "x" * 200}), 413)
        assert "100 bytes" in err["message"]

        def chunks():            # no Content-Length: the real size decides
            yield b'{"prompt": "'
            yield b"x" * 200
            yield b'"}'
        error_of(c.post(COMP, content=chunks(), headers={"content-type": "application/json"}), 413)
        assert c.post(COMP, json={"prompt": "x", "max_tokens": 1}).status_code == 200


def test_queue_full_and_rank_lost_are_503s():
    sched = FakeScheduler()
    state = make_state(sched, max_queue=2)
    with TestClient(create_app(state)) as c:
        # streams_total (4) requests run, two more may wait: six places held fill the queue
        held = [state.backlog.enter() for _ in range(6)]
        r = c.post(COMP, json={"prompt": "x"})
        err = error_of(r, 503)
        assert err["code"] == "queue_full" and r.headers["retry-after"] == "1"
        held.pop().release()
        assert c.post(COMP, json={"prompt": "x", "max_tokens": 1}).status_code == 200
        assert state.backlog.count == 5         # the finished request gave its place back
        sched.state["ranks_ok"] = False
        err = error_of(c.post(CHAT, json={"messages": MSGS}), 503)
        assert err["code"] == "rank_lost"


def test_planner_refusal_reaches_the_client_as_is():
    from server.planner.admission import Refused
    sched = FakeScheduler()
    sched.check_error = Refused("context_length_exceeded", "needs 9 pages; a stream holds 8")
    with TestClient(create_app(make_state(sched))) as c:
        err = error_of(c.post(COMP, json={"prompt": "x"}), 400)
    assert err["code"] == "context_length_exceeded"
    assert err["message"] == "needs 9 pages; a stream holds 8"
