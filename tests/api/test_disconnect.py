"""A client that leaves frees its scheduler stream: cancel(req_id) is called promptly."""
import asyncio
import json

from api_fakes import FakeScheduler, make_state
from server.api import create_app


async def call_and_leave(app, path: str, body: dict, leave_after: float, started=None) -> list:
    """Drive the app as an ASGI server would; the client disconnects leave_after s after
    started() turns true (the prompt is tokenized on a worker thread first)."""
    raw = json.dumps(body).encode()
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
             "root_path": "", "scheme": "http", "server": ("test", 80), "client": ("c", 1),
             "headers": [(b"content-type", b"application/json"),
                         (b"content-length", str(len(raw)).encode())]}
    sent_body = False
    gone = asyncio.Event()
    messages = []

    async def receive():
        nonlocal sent_body
        if not sent_body:
            sent_body = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        messages.append(message)
        if gone.is_set() and message["type"] == "http.response.body":
            raise OSError("client is gone")

    async def leave():
        for _ in range(500):
            if started is None or started():
                break
            await asyncio.sleep(0.01)
        await asyncio.sleep(leave_after)
        gone.set()

    leaver = asyncio.create_task(leave())
    try:
        await asyncio.wait_for(app(scope, receive, send), timeout=5)
    except OSError:
        pass
    await leaver
    return messages


def run_case(path: str, body: dict):
    sched = FakeScheduler(delay=0.01)
    app = create_app(make_state(sched))
    asyncio.run(call_and_leave(app, path, {**body, "max_tokens": 200}, leave_after=0.1,
                               started=lambda: bool(sched.started)))
    return sched


def test_streaming_disconnect_cancels():
    sched = run_case("/v1/completions", {"prompt": "x", "stream": True})
    req = sched.started[0]
    assert sched.cancelled == [req.id]
    assert not sched.active


def test_non_streaming_disconnect_cancels():
    sched = run_case("/v1/completions", {"prompt": "x"})
    assert sched.cancelled == [sched.started[0].id]
    assert not sched.active


def test_chat_disconnects_cancel():
    for stream in (True, False):
        sched = run_case("/v1/chat/completions",
                         {"messages": [{"role": "user", "content": "hi"}], "stream": stream})
        assert sched.cancelled == [sched.started[0].id] and not sched.active


def test_finished_request_is_not_cancelled(client, sched):
    client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
    client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3, "stream": True})
    assert sched.cancelled == []
