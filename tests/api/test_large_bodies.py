"""Bodies too large to handle in one GIL-holding call are handled in slices, with the same
result: a chat validated a slice of messages at a time, a /tokenize reply rendered a slice of
ids at a time (the event loop's thread runs between slices; tests/e2e/test_hardening.py
times /health beside them)."""
import json

import pytest

from server.api import request_checks, tokenize
from server.api.errors import ApiError
from server.api.request_checks import decode_body
from server.api.schemas import ChatRequest, TokenizeRequest


def test_a_long_chat_validates_in_slices_to_the_same_model(monkeypatch):
    msgs = [{"role": ("user", "assistant")[i % 2], "content": f"m{i}"} for i in range(1000)]
    raw = json.dumps({"messages": msgs, "max_tokens": 5, "temperature": 0.5}).encode()
    whole = decode_body(raw, ChatRequest)
    monkeypatch.setattr(request_checks, "MESSAGES_AT_ONCE", 64)
    sliced = decode_body(raw, ChatRequest)
    assert sliced == whole and len(sliced.messages) == 1000
    assert decode_body(json.dumps({"messages": msgs}).encode(), TokenizeRequest).messages == whole.messages


def test_a_bad_message_past_the_first_slice_is_named_by_its_place(monkeypatch):
    monkeypatch.setattr(request_checks, "MESSAGES_AT_ONCE", 64)
    msgs = [{"role": "user", "content": "x"}] * 300
    msgs[200] = {"role": "nobody", "content": "x"}
    with pytest.raises(ApiError) as e:
        decode_body(json.dumps({"messages": msgs}).encode(), ChatRequest)
    assert e.value.param == "messages[200].role"


@pytest.mark.parametrize("n", [0, 1, 7, 50_000, 120_001])
def test_the_tokenize_reply_has_json_dumps_bytes(monkeypatch, n):
    ids = list(range(n))
    monkeypatch.setattr(tokenize, "_token_ids", lambda state, body: ids)

    class State:
        context = 8192
    want = json.dumps({"tokens": ids, "count": n, "max_model_len": 8192}, separators=(",", ":"))
    assert tokenize._reply(State, None) == want.encode()
