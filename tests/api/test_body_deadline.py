"""The body deadline (server/api/protocol.py, --body-timeout): a request whose headers came
in time but whose body trickles gets a 408 in OpenAI's shape and a close once the deadline
passes, and the app reading it hears a disconnect; a body sent in time, even in pieces, is
served on a kept connection. Before it, only the headers had a deadline: a trickled body
held its connection (busy, so never evicted by --max-connections) for as long as it liked."""
from __future__ import annotations

import json
import socket
import threading
import time

import pytest
import uvicorn

from server.api.bodylimit import BodyLimit
from server.api.protocol import ConnectionLimits, guarded_protocol

BODY_TIMEOUT = 1.0


async def echo(scope, receive, send):
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


seen: list[str] = []


async def app(scope, receive, send):       # the reading app, as the real one: behind BodyLimit
    await BodyLimit(echo, 1 << 20)(scope, receive, send)
    seen.append("returned")


@pytest.fixture(scope="module")
def server():
    limits = ConnectionLimits(header_timeout=5.0, max_connections=64, body_timeout=BODY_TIMEOUT)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning", http=guarded_protocol(limits), lifespan="off")
    srv = uvicorn.Server(config)
    t = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    while not srv.started:
        time.sleep(0.02)
    yield sock.getsockname()[1], limits
    srv.should_exit = True
    t.join(10)


def _read_all(s: socket.socket) -> bytes:
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


HEAD = b"POST /x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n"


def test_a_trickled_body_gets_a_408_and_a_close(server):
    port, limits = server
    seen.clear()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        t0 = time.monotonic()
        s.sendall(HEAD + b"{")
        try:
            for _ in range(20):                   # a byte every 0.2 s: 40 bytes would take 8 s
                time.sleep(0.2)
                s.sendall(b" ")
        except OSError:                           # closed by the server under our feet
            pass
        reply = _read_all(s)
        took = time.monotonic() - t0
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408 "), reply[:200]
    assert b"connection: close" in head.lower()
    assert json.loads(body) == {"error": {
        "message": f"the request's body did not arrive within {BODY_TIMEOUT:g} s of its headers "
                   "(--body-timeout)", "type": "invalid_request_error", "param": None,
        "code": "request_timeout"}}
    assert BODY_TIMEOUT <= took < BODY_TIMEOUT + 3
    assert limits.body_late >= 1
    time.sleep(0.2)
    assert seen == ["returned"]                   # the app heard the disconnect: not left waiting


def test_a_body_in_pieces_within_the_deadline_is_served_on_a_kept_connection(server):
    port, _ = server
    payload = b'{"a": "' + b"x" * 31 + b'"}'
    assert len(payload) == 40
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        for _ in range(2):                        # twice on one connection: the timer was cancelled
            s.sendall(HEAD)
            for i in range(0, 40, 10):            # 0.6 s a body: two bodies outlast the deadline
                time.sleep(0.15)
                s.sendall(payload[i:i + 10])
            reply = b""
            while not reply.endswith(payload):
                chunk = s.recv(65536)
                assert chunk, reply
                reply += chunk
            assert reply.startswith(b"HTTP/1.1 200 ")
        time.sleep(BODY_TIMEOUT + 0.3)            # past the deadline: nothing fires on the idle one
        s.sendall(HEAD + payload)
        assert s.recv(65536).startswith(b"HTTP/1.1 200 ")
