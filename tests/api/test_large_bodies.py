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


# ---- full garbage collections held off while a large body is in the app (gchold.py) ----

def _full_passes_while(make):
    """How many full (oldest-generation) collections run while make() builds objects."""
    import gc
    full = []

    def seen(phase, info):
        if phase == "start" and info["generation"] == 2:
            full.append(1)
    gc.callbacks.append(seen)
    try:
        kept = make()
    finally:
        gc.callbacks.remove(seen)
    del kept
    return len(full)


def _pile():
    """More surviving tracked objects than a quarter of the old generation: CPython's rule
    starts a full pass on the way (the 110,000-message chat's piles started six)."""
    import gc
    n = len(gc.get_objects(generation=2)) // 3 + 50_000
    return [[i] for i in range(n)]


def test_a_large_body_holds_off_full_collections_and_a_small_one_does_not():
    import asyncio
    import gc

    from server.api import gchold
    from server.api.bodylimit import BodyLimit
    from server.api.request_checks import LARGE_BODY
    seen = {}

    async def app(scope, receive, send):
        m = await receive()
        seen[len(m["body"])] = (gchold.held(), gc.get_threshold()[2],
                                _full_passes_while(_pile))
        if m["body"].startswith(b"!"):
            raise RuntimeError("the app failed")
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call(body: bytes):
        sent = iter([{"type": "http.request", "body": body, "more_body": False}])

        async def receive():
            return next(sent)

        async def send(message):
            pass
        scope = {"type": "http", "method": "POST", "headers": [
            (b"content-length", str(len(body)).encode())]}
        await BodyLimit(app, 16 << 20)(scope, receive, send)

    before = gc.get_threshold()
    small, large = b"x" * 1000, b"x" * (LARGE_BODY + 1)
    asyncio.run(call(small))
    asyncio.run(call(large))
    with pytest.raises(RuntimeError):
        asyncio.run(call(b"!" * (LARGE_BODY + 2)))
    assert gc.get_threshold() == before and gchold.held() == 0      # as it was, even on a raise
    held, t2, passes = seen[len(small)]
    assert held == 0 and t2 == before[2]
    if passes == 0:
        pytest.skip("this Python started no full pass for the pile even without a hold")
    assert seen[len(large)] == (1, gchold.NEVER, 0)
    assert seen[len(large) + 1] == (1, gchold.NEVER, 0)


def test_holds_nest_across_threads_and_the_last_one_out_restores_the_threshold():
    import gc
    import threading

    from server.api import gchold
    before = gc.get_threshold()
    inside, go = threading.Event(), threading.Event()

    def other():
        with gchold.LargeBody():
            inside.set()
            go.wait(10)

    t = threading.Thread(target=other)
    with gchold.LargeBody():
        t.start()
        assert inside.wait(10) and gchold.held() == 2
    assert gchold.held() == 1 and gc.get_threshold()[2] == gchold.NEVER    # the other is in
    go.set()
    t.join(10)
    assert gchold.held() == 0 and gc.get_threshold() == before


# ---- a large body's JSON parsed a slice at a time (slicedjson.py) ----

from hypothesis import given, settings, strategies as st  # noqa: E402

from server.api import slicedjson  # noqa: E402

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
_values = st.recursive(_scalars, lambda kids: st.lists(kids, max_size=6)
                       | st.dictionaries(st.text(max_size=4), kids, max_size=5), max_leaves=30)
_ws = st.sampled_from(["", " ", "\n", "\t ", "\r\n"])


@st.composite
def _json_texts(draw):
    """An object (or now and then anything else) written with random whitespace, then
    sometimes cut or spliced: valid and invalid JSON, both."""
    if draw(st.integers(0, 9)):
        value = draw(st.dictionaries(st.text(max_size=4), _values | st.lists(_values),
                                     max_size=5))
    else:
        value = draw(_values)
    sep = draw(_ws)
    text = json.dumps(value, ensure_ascii=draw(st.booleans()),
                      separators=("," + sep, ":" + draw(_ws)))
    text = draw(_ws) + text + draw(_ws)
    how = draw(st.integers(0, 5))
    if how == 1 and text:
        cut = draw(st.integers(0, len(text) - 1))
        text = text[:cut]
    elif how == 2 and text:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from([",", "]", "}", "[", "{", ":", '"', "x",
                                                 "\ufeff", " ,", ",]", "1"])) + text[at:]
    return text.encode(draw(st.sampled_from(["utf-8", "utf-8", "utf-16", "utf-32-le"])),
                       "surrogatepass")


def _outcome(f, raw):
    try:
        return ("value", f(raw))
    except (ValueError, RecursionError) as e:
        return (type(e).__name__, str(e))


@settings(max_examples=400, deadline=None)
@given(_json_texts())
def test_a_sliced_parse_gives_json_loads_value_or_error(raw):
    slicedjson.ITEMS_AT_ONCE, old = 2, slicedjson.ITEMS_AT_ONCE
    try:
        assert _outcome(slicedjson.loads, raw) == _outcome(json.loads, raw)
    finally:
        slicedjson.ITEMS_AT_ONCE = old


@pytest.mark.parametrize("raw", [b"", b" ", b"{", b"{}", b" {} ", b"{} x", b"[]", b"1",
                                 b'{"a":[1,2,]}', b'{"a":[1 2]}', b'{"a":1,}', b'{"a" 1}',
                                 b'{"a":[]}', b'{"a":[[]],"a":2}', b'\xef\xbb\xbf{"a":[1]}',
                                 b'\xef\xbb\xbf\xef\xbb\xbf{}', b'{"a":NaN,"b":[Infinity]}',
                                 b'{"a":"\\ud800"}', b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}",
                                 b'{"a":"x\x01"}', b'\xff\xfe'])
def test_a_sliced_parse_on_the_edges(raw):
    assert _outcome(slicedjson.loads, raw) == _outcome(json.loads, raw)


def test_a_long_chat_lets_the_gil_go_between_slices(monkeypatch):
    sleeps = []
    monkeypatch.setattr(slicedjson.time, "sleep", lambda s: sleeps.append(s))
    raw = json.dumps({"messages": [{"role": "user", "content": "x"}] * 10_000,
                      "prompt": list(range(5000))}).encode()
    assert slicedjson.loads(raw) == json.loads(raw)
    assert len(sleeps) == 10_000 // slicedjson.ITEMS_AT_ONCE + 5000 // slicedjson.ITEMS_AT_ONCE


def test_overlapping_large_bodies_hold_full_collections_at_most_max_hold(monkeypatch):
    import gc

    from server.api import gchold
    before = gc.get_threshold()
    with gchold.LargeBody():
        assert gc.get_threshold()[2] == gchold.NEVER
        monkeypatch.setattr(gchold, "MAX_HOLD_S", 0.0)     # the hold began too long ago
        with gchold.LargeBody():
            assert gc.get_threshold() == before and gchold.held() == 2
        assert gc.get_threshold() == before
    assert gc.get_threshold() == before and gchold.held() == 0
    with gchold.LargeBody():                               # a fresh hold after it
        assert gc.get_threshold()[2] == gchold.NEVER
    assert gc.get_threshold() == before
