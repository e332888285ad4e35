"""A client that stops reading a stream holds neither its queue place nor, for long, its
connection (issue 30, item 4).

- The place (server/api/backlog.py) is given back when the engine finishes the request,
  whatever the client does: the stream's pieces are drained by a task of their own, not
  by the writes to the client.
- A streaming client that reads nothing for --write-timeout seconds is cut off
  (server/api/protocol.py), which ends its generation as a disconnect does."""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from api_fakes import FakeScheduler, make_state
from server.api import create_app
from server.api.protocol import ConnectionLimits, guarded_protocol


def _scope(raw: bytes) -> dict:
    path = "/v1/completions"
    return {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": "POST", "path": path, "raw_path": path.encode(), "query_string": b"",
            "root_path": "", "scheme": "http", "server": ("test", 80), "client": ("c", 1),
            "headers": [(b"content-type", b"application/json"),
                        (b"content-length", str(len(raw)).encode())]}


async def _stalled_client(app, body: dict, gone: asyncio.Event, sent: list):
    """An ASGI client that sends its body, takes the response's head and first body
    message, and then reads nothing more: its next send blocks until it goes (`gone`)."""
    raw = json.dumps(body).encode()
    fed = False

    async def receive():
        nonlocal fed
        if not fed:
            fed = True
            return {"type": "http.request", "body": raw, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)
        if message["type"] == "http.response.body" and len(sent) > 2:
            await gone.wait()              # the client's buffers are full: no progress

    await app(_scope(raw), receive, send)   # (a send after it went is dropped, as uvicorn does)


def test_stalled_streams_give_their_place_back_when_the_engine_finishes():
    """The issue's case: three streams whose clients stop reading, against 2 streams and
    --max-queue 1. Once the engine has finished them, a new request is admitted (it got
    503 queue_full for as long as the stalled clients stayed)."""
    sched = FakeScheduler(delay=0.002, push=True)     # the engine runs whoever reads
    sched.state["streams_total"] = 2
    state = make_state(sched, max_queue=1)
    app = create_app(state)

    async def main():
        gone = asyncio.Event()
        sents = [[] for _ in range(3)]
        clients = [asyncio.ensure_future(_stalled_client(
            app, {"prompt": "x", "max_tokens": 40, "stream": True}, gone, s)) for s in sents]
        deadline = time.monotonic() + 5
        while len(sched.finished) < 3 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(sched.finished) == 3, "the engine did not finish"
        while state.backlog.count and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        held = state.backlog.count
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            r = await c.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
        stalled = all(not any(m.get("more_body") is False for m in s) for s in sents)
        gone.set()
        await asyncio.gather(*clients)
        return held, r, stalled

    held, r, stalled = asyncio.run(main())
    assert stalled, "a client read its stream to the end: nothing was stalled"
    assert held == 0, f"{held} finished requests still hold their queue place"
    assert r.status_code == 200, r.text
    assert state.backlog.count == 0


# ---- the write timeout, on a real uvicorn -------------------------------------------------

WRITE_TIMEOUT = 2.0                    # seconds: room for a loaded host to read between pauses


@pytest.fixture(scope="module")
def live():
    sched = FakeScheduler()                     # a token each turn of the loop
    state = make_state(sched, context=1_000_000)
    app = create_app(state)
    limits = ConnectionLimits(header_timeout=5.0, max_connections=64, body_timeout=5.0,
                              write_timeout=WRITE_TIMEOUT)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", http=guarded_protocol(limits),
                            lifespan="off")
    srv = uvicorn.Server(config)
    t = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.02)
    yield sock.getsockname()[1], sched, state, limits
    srv.should_exit = True
    t.join(10)


def _request(body: dict) -> bytes:
    raw = json.dumps(body).encode()
    return (b"POST /v1/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)


def test_a_stream_nobody_reads_is_cut_after_the_write_timeout(live):
    """A client with a small receive buffer asks for a long stream with logprobs (about
    300 bytes a token) and reads nothing: once the buffers are full and WRITE_TIMEOUT passes
    without a byte read, the server drops the connection and the generation is cancelled
    long before its 500,000 tokens; a client that reads on is served to the end."""
    port, sched, state, limits = live
    before, late0 = len(sched.cancelled), limits.write_late
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    body = {"prompt": "x", "max_tokens": 500_000, "stream": True, "logprobs": 5}
    s.sendall(_request(body))
    t0 = time.monotonic()
    deadline = t0 + 20
    while len(sched.cancelled) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    took = time.monotonic() - t0
    rid = sched.started[-1].id
    try:
        assert sched.cancelled[before:] == [rid], "the stalled stream was never ended"
        assert limits.write_late == late0 + 1
        # the cut ends the generation before its 500,000 tokens (counted, not timed: how
        # long the cut takes depends on the machine's load, bounded by the wait above)
        assert rid not in sched.finished and sched.produced[rid] < 500_000, sched.produced[rid]
        s.settimeout(5)
        got = b""
        try:
            while chunk := s.recv(1 << 16):   # what was buffered, then the close
                got += chunk
        except ConnectionResetError:
            pass
        assert b"[DONE]" not in got and got.startswith(b"HTTP/1.1 200")
    finally:
        s.close()
    deadline = time.monotonic() + 5
    while state.backlog.count and time.monotonic() < deadline:
        time.sleep(0.02)
    assert state.backlog.count == 0
    # a client that reads with pauses shorter than the timeout is served to the end
    late = limits.write_late
    got, pauses = _read_with_pauses(port, {**body, "max_tokens": 20_000}, every=1 << 20,
                                    pause=0.3 * WRITE_TIMEOUT)
    assert got.endswith(b"data: [DONE]\n\n\r\n0\r\n\r\n"), got[-200:]   # the last chunk
    assert limits.write_late == late and pauses >= 3, pauses
    print(f"stalled stream cut {took:.2f} s after its request, {sched.produced[rid]} tokens"
          f" (write timeout {WRITE_TIMEOUT} s)")


def _read_with_pauses(port: int, body: dict, every: int, pause: float) -> tuple[bytes, int]:
    """Read a whole reply through a small receive buffer, resting `pause` s after each
    `every` bytes (the server's buffers fill meanwhile). -> (the bytes, pauses taken)."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    s.settimeout(10)
    s.sendall(_request(body))
    got, pauses, mark = bytearray(), 0, every
    with s:
        while not got.endswith(b"0\r\n\r\n"):
            chunk = s.recv(1 << 16)
            if not chunk:
                break
            got += chunk
            if len(got) >= mark:
                time.sleep(pause)
                pauses += 1
                mark += every
    return bytes(got), pauses
