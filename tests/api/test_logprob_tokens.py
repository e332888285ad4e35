"""Logprob token strings of tokens that are a piece of a UTF-8 character (issue 30): shown
as their bytes, as OpenAI does (`\\xc3` in chat with `bytes` the raw bytes; `bytes:\\xc3`
in completions and prompt_logprobs), not as U+FFFD, which said nothing of the bytes and
made two pieces one key of a completions top_logprobs."""
from __future__ import annotations

from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, FakeTokenizer, make_state
from server.api import create_app
from server.api.logprob_tokens import TokenTexts

COMP, CHAT = "/v1/completions", "/v1/chat/completions"
B = 3                                                  # the fake's id of byte 0


def client(reply: str) -> TestClient:
    return TestClient(create_app(make_state(FakeScheduler(reply=reply), context=4096)))


def test_completions_tokens_and_top_keys_are_bytes_forms():
    with client("ö!") as c:                            # c3 b6 21
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 3, "logprobs": 2})
    lp = r.json()["choices"][0]["logprobs"]
    assert r.json()["choices"][0]["text"] == "ö!"
    assert lp["tokens"] == ["bytes:\\xc3", "bytes:\\xb6", "!"]
    # the fake's alternatives: the token, then the next id (c4: another lead byte)
    assert lp["top_logprobs"][0] == {"bytes:\\xc3": -0.5, "bytes:\\xc4": -1.5}
    assert lp["top_logprobs"][2] == {"!": -0.5, '"': -1.5}


def test_chat_tokens_are_escaped_bytes_and_bytes_are_the_tokens_own():
    with client("ö!") as c:
        r = c.post(CHAT, json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 3,
                               "logprobs": True, "top_logprobs": 2})
    content = r.json()["choices"][0]["logprobs"]["content"]
    assert [(e["token"], e["bytes"]) for e in content] == [
        ("\\xc3", [0xC3]), ("\\xb6", [0xB6]), ("!", [0x21])]
    assert [(e["token"], e["bytes"]) for e in content[0]["top_logprobs"]] == [
        ("\\xc3", [0xC3]), ("\\xc4", [0xC4])]
    assert bytes(b for e in content for b in e["bytes"]).decode() == "ö!"


def test_streamed_chat_too():
    with client("é") as c:
        r = c.post(CHAT, json={"messages": [{"role": "user", "content": "x"}], "max_tokens": 2,
                               "logprobs": True, "stream": True})
    assert '"token":"\\\\xc3","logprob":-0.5,"bytes":[195]' in r.text, r.text


def test_prompt_logprobs_decoded_token_and_echo():
    with client("a") as c:
        r = c.post(COMP, json={"prompt": "é", "max_tokens": 1, "prompt_logprobs": 1})
        plp = r.json()["choices"][0]["prompt_logprobs"]
        assert plp[1] == {str(B + 0xC3): {"logprob": -1.0, "rank": 1, "decoded_token": "bytes:\\xc3"}}
        assert plp[2][str(B + 0xA9)]["decoded_token"] == "bytes:\\xa9"
        r = c.post(COMP, json={"prompt": "é", "max_tokens": 1, "echo": True, "logprobs": 0})
        assert r.json()["choices"][0]["logprobs"]["tokens"] == ["<s>", "bytes:\\xc3", "bytes:\\xa9", "a"]


def test_whole_tokens_and_tokenizers_without_bytes_are_their_text():
    class NoBytes:                                     # duck-typed: decode alone
        decode = FakeTokenizer().decode
    texts = TokenTexts(FakeTokenizer())
    assert texts.chat(B + ord("a")) == ("a", [97]) and texts.legacy(300) == " w300"
    assert texts.text(B + 0xC3) == "\ufffd"
    plain = TokenTexts(NoBytes())
    assert plain.legacy(B + 0xC3) == "\ufffd" and plain.chat(B + 0xC3) == ("\ufffd", [239, 191, 189])
