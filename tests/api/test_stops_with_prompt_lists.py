"""The stop automaton, the stop bound, prompt_logprobs once and its size bound together with
a list of prompts on /v1/completions and with /v1/messages' stop_sequences: stops compiled
once and shared by every prompt's choices, prompt_logprobs on each prompt's first choice,
the size bound per prompt, stop_sequences under stop's limits."""
from __future__ import annotations

import json

from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app
from server.api.prompt_logprob_json import MAX_ENTRIES
from server.api.sampling import MAX_STOP_CHARS, MAX_STOPS

COMP, MSG = "/v1/completions", "/v1/messages"


def _client(sched, context=4096) -> TestClient:
    return TestClient(create_app(make_state(sched, context=context)))


def test_one_stop_set_cuts_every_prompts_choices():
    sched = FakeScheduler(reply="Hello, wörld!")
    with _client(sched) as c:
        r = c.post(COMP, json={"prompt": ["a", "bc"], "n": 2, "max_tokens": 20,
                               "stop": ["zz", "wö"]})
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    assert [(ch["index"], ch["text"], ch["finish_reason"]) for ch in choices] == [
        (i, "Hello, ", "stop") for i in range(4)]
    assert len(sched.started) == 4
    assert len({id(req) for req in sched.started}) == 4


def test_prompt_logprobs_ride_on_each_prompts_first_choice():
    sched = FakeScheduler(reply="ab")
    with _client(sched) as c:
        r = c.post(COMP, json={"prompt": ["xy", "uvwz"], "n": 2, "max_tokens": 2,
                               "prompt_logprobs": 1, "logprobs": 0})
    assert r.status_code == 200, r.text
    choices = r.json()["choices"]
    # the fake: bos, then a token a byte
    assert len(choices[0]["prompt_logprobs"]) == 3 and choices[1]["prompt_logprobs"] is None
    assert len(choices[2]["prompt_logprobs"]) == 5 and choices[3]["prompt_logprobs"] is None
    assert all(ch["prompt_logprobs"][0] is None for ch in (choices[0], choices[2]))
    assert all(ch["logprobs"]["tokens"] == ["a", "b"] for ch in choices)


def test_the_size_bound_holds_for_each_prompt_before_any_starts():
    long_prompt = "x" * (MAX_ENTRIES // 21 + 1)          # (tokens - 1) x 21 > MAX_ENTRIES
    sched = FakeScheduler()
    with _client(sched, context=32768) as c:
        r = c.post(COMP, json={"prompt": ["short", long_prompt], "max_tokens": 1,
                               "prompt_logprobs": 20})
        assert r.status_code == 400, r.text[:300]
        err = r.json()["error"]
        assert err["param"] == "prompt_logprobs" and f"{MAX_ENTRIES:,}" in err["message"]
        assert sched.started == []
        under = "x" * (MAX_ENTRIES // 21)
        r = c.post(COMP, json={"prompt": [under, under], "max_tokens": 1,
                               "prompt_logprobs": 20})
        assert r.status_code == 200, r.text[:300]
        assert [len(ch["prompt_logprobs"]) for ch in r.json()["choices"]] == [len(under) + 1] * 2


def _messages(c, stops):
    return c.post(MSG, json={"max_tokens": 20, "stop_sequences": stops,
                             "messages": [{"role": "user", "content": "hi"}]})


def test_stop_sequences_count_against_stops_limits():
    sched = FakeScheduler(reply="Hello, wörld!")
    with _client(sched) as c:
        for stops, says in ((["s"] * (MAX_STOPS + 1), f"at most {MAX_STOPS} stop strings"),
                            (["a" * (MAX_STOP_CHARS + 1)], f"at most {MAX_STOP_CHARS} characters")):
            r = _messages(c, stops)
            assert r.status_code == 400, r.text
            body = r.json()
            assert body["type"] == "error" and body["error"]["type"] == "invalid_request_error"
            assert "stop_sequences" in body["error"]["message"] and says in body["error"]["message"]
        assert sched.started == []
        r = _messages(c, [f"{i:03d}" + "q" * (MAX_STOP_CHARS - 3) for i in range(MAX_STOPS - 1)]
                     + ["ld"])
        assert r.status_code == 200, r.text
        assert r.json()["stop_reason"] == "stop_sequence" and r.json()["stop_sequence"] == "ld"
        assert r.json()["content"][0]["text"] == "Hello, wör"
        doc = c.get("/openapi.json").json()["components"]["schemas"]["MessagesRequest"]
    assert doc["properties"]["stop_sequences"]["anyOf"][0] == {
        "type": "array", "maxItems": MAX_STOPS,
        "items": {"type": "string", "minLength": 1, "maxLength": MAX_STOP_CHARS}}


# Qwen3-style: the template mentions <think> (the reply opens it itself)
QWEN_LIKE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}")
THOUGHT = "<think>hm</think>\n\nö!"


def test_chat_reasoning_split_with_token_texts_whole_and_streamed():
    """The reply with logprobs is built on a worker and still split into reasoning and
    content; each token's entry is TokenTexts' (a piece of a character as its bytes), and
    streamed, a piece's logprobs ride on the next delta it gives."""
    sched = FakeScheduler(reply=THOUGHT, eos_after=len(THOUGHT.encode()))
    state = make_state(sched, context=4096)
    state.render_chat, state.chat_template, state.reasoning_parser = None, QWEN_LIKE, "auto"
    body = {"messages": [{"role": "user", "content": "x"}], "max_tokens": 40, "logprobs": True,
            "stop": ["zz"]}
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/chat/completions", json=body)
        assert r.status_code == 200, r.text
        ch = r.json()["choices"][0]
        assert ch["message"]["content"] == "ö!" and ch["message"]["reasoning_content"] == "hm"
        content = ch["logprobs"]["content"]
        assert bytes(b for e in content for b in e["bytes"]).decode() == THOUGHT
        assert [e["token"] for e in content[-3:]] == ["\\xc3", "\\xb6", "!"]
        r = c.post("/v1/chat/completions", json={**body, "stream": True})
    events = [json.loads(line[6:]) for line in r.text.splitlines()
              if line.startswith("data: {")]
    deltas = [e["choices"][0] for e in events if e["choices"]]
    reasoning = "".join(d["delta"].get("reasoning_content") or "" for d in deltas)
    text = "".join(d["delta"].get("content") or "" for d in deltas)
    assert (reasoning, text) == ("hm", "ö!")
    sent = [e for d in deltas if d["logprobs"] for e in d["logprobs"]["content"]]
    assert bytes(b for e in sent for b in e["bytes"]).decode() == THOUGHT
