"""Issue 19's request fields against the fake scheduler: n > 1 (derived seeds, indices,
usage), echo, include_stop_str_in_output, min_tokens and stop strings, tool plans and
tool replies (parsed, streamed), refusals naming their field."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api_fakes import EOS, FakeScheduler, make_state
from server.api import create_app

COMP, CHAT = "/v1/completions", "/v1/chat/completions"
MSGS = [{"role": "user", "content": "hi"}]
CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def client_for(sched) -> TestClient:
    return TestClient(create_app(make_state(sched, context=4096)))


def sse(r) -> list:
    return [json.loads(line[6:]) for line in r.text.splitlines()
            if line.startswith("data: ") and line != "data: [DONE]"]


def test_n_gives_choices_with_derived_seeds_and_summed_usage():
    sched = FakeScheduler(reply="abc")
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 4, "n": 3, "seed": 2**64 - 2})
    assert r.status_code == 200, r.text
    body = r.json()
    assert [ch["index"] for ch in body["choices"]] == [0, 1, 2]
    assert [q.params.seed for q in sched.started] == [2**64 - 2, 2**64 - 1, 0]
    assert body["usage"]["completion_tokens"] == 12 and body["usage"]["prompt_tokens"] == 2
    assert len({q.id for q in sched.started}) == 3
    # choices 1.. follow choice 0 (one prefill: tests/model/test_choices_share.py)
    assert [q.follows for q in sched.started] == [None, sched.started[0].id, sched.started[0].id]


def test_echo_with_logprobs_puts_the_prompts_tokens_first():
    """OpenAI's legacy echo + logprobs: the prompt's tokens, the first without a logprob,
    then the reply's; offsets run over the echoed text."""
    sched = FakeScheduler(reply="ab")
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": "hey", "max_tokens": 2, "echo": True, "logprobs": 1})
    assert r.status_code == 200, r.text
    ch = r.json()["choices"][0]
    assert ch["text"] == "heyab" and "prompt_logprobs" not in ch
    lp = ch["logprobs"]
    assert lp["tokens"] == ["<s>", "h", "e", "y", "a", "b"]           # the fake's bos, then bytes
    assert lp["token_logprobs"] == [None, -1.0, -2.0, -3.0, -0.5, -0.5]
    assert lp["top_logprobs"][0] is None and lp["top_logprobs"][1] == {"h": -0.25}
    assert lp["text_offset"] == [0, 3, 4, 5, 3, 4]
    assert sched.started[0].params.prompt_logprobs == 1


def test_prompt_logprobs_in_vllms_shape():
    sched = FakeScheduler(reply="abc")
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": "hey", "max_tokens": 2, "n": 2, "prompt_logprobs": 2})
        assert r.status_code == 200, r.text
        choices = r.json()["choices"]
        h, e, y = (b + 3 for b in b"hey")
        want = [None,
                {str(h): {"logprob": -1.0, "rank": 1, "decoded_token": "h"},
                 str(h + 1): {"logprob": -1.25, "rank": 2, "decoded_token": "i"}},
                {str(e): {"logprob": -2.0, "rank": 2, "decoded_token": "e"},
                 str(e + 1): {"logprob": -1.25, "rank": 2, "decoded_token": "f"}},
                {str(y): {"logprob": -3.0, "rank": 3, "decoded_token": "y"},
                 str(y + 1): {"logprob": -1.25, "rank": 2, "decoded_token": "z"}}]
        # the prompt token first, then the alternatives; a token among them once (e, rank 2
        # from its own entry: the fake's top holds t itself first with -0.25)
        got = choices[0]["prompt_logprobs"]
        assert got[0] is None and len(got) == 4
        assert list(got[1]) == [str(h), str(h + 1)] and got[1][str(h)]["logprob"] == -1.0
        assert got[2][str(e)] == want[2][str(e)] and got[3][str(y)] == want[3][str(y)]
        assert choices[1]["prompt_logprobs"] is None                # once: on choice 0
        assert [q.params.prompt_logprobs for q in sched.started] == [2, None]   # computed once
        r = c.post(CHAT, json={"messages": MSGS, "max_tokens": 2, "prompt_logprobs": 0})
        body = r.json()
        assert body["prompt_logprobs"][0] is None
        assert all(len(d) == 1 for d in body["prompt_logprobs"][1:])
        assert "prompt_logprobs" not in body["choices"][0]
        r = c.post(COMP, json={"prompt": "hey", "max_tokens": 2})
        assert "prompt_logprobs" not in r.json()["choices"][0]


def test_n_streams_every_index():
    with client_for(FakeScheduler(reply="abc")) as c:
        r = c.post(CHAT, json={"messages": MSGS, "max_tokens": 3, "n": 2, "stream": True,
                               "stream_options": {"include_usage": True}})
    chunks = sse(r)
    text = {0: "", 1: ""}
    for ch in chunks:
        for choice in ch["choices"]:
            text[choice["index"]] += choice["delta"].get("content", "")
    assert text == {0: "abc", 1: "abc"}
    assert chunks[-1]["usage"]["completion_tokens"] == 6


def test_echo_prepends_the_prompt():
    with client_for(FakeScheduler(reply="abc")) as c:
        r = c.post(COMP, json={"prompt": "hey ", "max_tokens": 2, "echo": True})
        assert r.json()["choices"][0]["text"] == "hey ab"
        r = c.post(COMP, json={"prompt": "hey ", "max_tokens": 2, "echo": True, "stream": True})
        assert "".join(ch["choices"][0]["text"] for ch in sse(r)) == "hey ab"


def test_include_stop_str_and_min_tokens():
    with client_for(FakeScheduler(reply="ab!cd!ef")) as c:
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 8, "stop": ["!"]})
        assert r.json()["choices"][0]["text"] == "ab"
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 8, "stop": ["!"],
                               "include_stop_str_in_output": True})
        assert r.json()["choices"][0]["text"] == "ab!"
        # min_tokens 4: the first "!" (token 3) does not stop; the second (token 6) does
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 8, "stop": ["!"], "min_tokens": 4})
        assert r.json()["choices"][0]["text"] == "ab!cd"


def test_min_tokens_reaches_the_scheduler_and_logit_bias_is_parsed():
    sched = FakeScheduler()
    with client_for(sched) as c:
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 3, "min_tokens": 2,
                               "logit_bias": {"7": -100, "5": 2.5}})
    assert r.status_code == 200
    p = sched.started[0].params
    assert p.min_tokens == 2 and p.logit_bias == ((5, 2.5), (7, -100.0))


def test_auto_tool_reply_is_parsed_into_tool_calls():
    with client_for(FakeScheduler(reply=CALL, eos_after=len(CALL.encode()))) as c:
        r = c.post(CHAT, json={"messages": MSGS, "tools": TOOLS, "max_tokens": 200})
        ch = r.json()["choices"][0]
        assert ch["finish_reason"] == "tool_calls", ch
        call = ch["message"]["tool_calls"][0]
        assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
        assert ch["message"]["content"] is None
        r = c.post(CHAT, json={"messages": MSGS, "tools": TOOLS, "max_tokens": 200, "stream": True})
        chunks = sse(r)
        deltas = [x["choices"][0]["delta"] for x in chunks if x["choices"]]
        args = "".join(tc["function"].get("arguments", "") for d in deltas
                       for tc in d.get("tool_calls", []))
        assert json.loads(args) == {"city": "Paris"}
        assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
        # tool_choice none: the same reply is text
        r = c.post(CHAT, json={"messages": MSGS, "tools": TOOLS, "tool_choice": "none",
                               "max_tokens": 200})
        assert r.json()["choices"][0]["message"]["content"] == CALL


def test_tools_reach_the_prompt_and_tool_turns_render_back():
    sched = FakeScheduler(reply="ok", eos_after=2)
    msgs = [{"role": "user", "content": "weather?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    with client_for(sched) as c:
        r = c.post(CHAT, json={"messages": msgs, "tools": TOOLS, "max_tokens": 5})
    assert r.status_code == 200, r.text
    prompt = bytes(t - 3 for t in sched.started[0].prompt_ids if 3 <= t < 259).decode()
    assert "<tools>" in prompt and '"get_weather"' in prompt            # the fallback prompt
    assert '{"name": "get_weather", "arguments": {"city": "Paris"}}' in prompt
    assert "<tool_response>\nsunny\n</tool_response>" in prompt


@pytest.mark.parametrize("body,param", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}, "tools": TOOLS},
     "tool_choice.function.name"),
    ({"tools": TOOLS + TOOLS}, "tools"),
    ({"messages": [{"role": "assistant", "tool_calls": [{"type": "function", "function": {
        "name": "f", "arguments": "{nope"}}]}]}, "messages[0].tool_calls"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema.schema"),
    ({"guided_regex": "a", "guided_choice": ["b"]}, "guided_choice"),
])
def test_tool_and_format_refusals_name_the_field(body, param):
    with client_for(FakeScheduler()) as c:
        r = c.post(CHAT, json={"messages": MSGS, "max_tokens": 2, **body})
    assert r.status_code == 400, r.text
    assert r.json()["error"]["param"] == param
