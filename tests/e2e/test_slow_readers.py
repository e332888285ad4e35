"""A client that stops reading, against a real server (dummy:tiny on the CPU), the issue's
case cut to one stream: `--parallel 1 --max-queue 0` and a stream nobody reads. Its queue
place comes back once the engine has finished it, so a new request is served (it got 503
queue_full for as long as the client stayed connected); with `--write-timeout 1` its
connection is dropped (issue 30, item 4)."""
from __future__ import annotations

import json
import socket
import time

import httpx
import pytest

from .live import START_TIMEOUT_S, Server

TEMPLATE = "{% for m in messages %}{{ m.content }}{% endfor %}"


@pytest.fixture
def server(request):
    s = Server("slow-reader", "on", ["--model", "dummy:tiny", "--context", "2560",
                                     "--parallel", "1", "--max-queue", "0",
                                     "--chat-template", TEMPLATE, *request.param])
    try:
        s.launch()
        s.wait_ready(time.monotonic() + START_TIMEOUT_S)
        yield s
    finally:
        s.stop()


def _stalled(port: int) -> socket.socket:
    """A stream of about 4.2 MB (2,400 tokens with 20 top logprobs each; the kernel takes
    about 2.8 MB of an unread connection here) asked for through a 4 KB receive buffer,
    and never read."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    s.connect(("127.0.0.1", port))
    raw = json.dumps({"messages": [{"role": "user", "content": "<1><2><3>"}],
                      "max_tokens": 2400, "logprobs": True, "top_logprobs": 20,
                      "temperature": 1, "ignore_eos": True, "stream": True}).encode()
    s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: t\r\nContent-Type: application/json"
              b"\r\nContent-Length: " + str(len(raw)).encode() + b"\r\n\r\n" + raw)
    return s


def _engine_idle(s: Server, within: float) -> None:
    deadline = time.monotonic() + within
    time.sleep(0.5)
    while True:
        h = s.health()
        if h["streams_busy"] == 0 and h["queue"] == 0:
            return
        assert time.monotonic() < deadline, f"the engine is still busy: {h}"
        time.sleep(0.1)


@pytest.mark.parametrize("server", [[]], indirect=True)
def test_a_stalled_stream_frees_its_place_when_the_engine_is_done(server):
    with _stalled(server.port) as s:
        _engine_idle(server, 60)
        r = httpx.post(server.url + "/v1/completions", timeout=30,
                       json={"prompt": [1, 2], "max_tokens": 4})
        assert r.status_code == 200, r.text
        s.setblocking(False)
        assert s.recv(12) == b"HTTP/1.1 200"        # still connected, its reply unread


@pytest.mark.parametrize("server", [["--write-timeout", "1"]], indirect=True)
def test_a_stalled_stream_is_dropped_after_the_write_timeout(server):
    with _stalled(server.port) as s:
        _engine_idle(server, 60)                     # nothing read meanwhile
        time.sleep(2)
        s.settimeout(10)
        got, reset = b"", False
        try:
            while chunk := s.recv(1 << 20):
                got += chunk
        except ConnectionResetError:
            reset = True
    assert reset or got.startswith(b"HTTP/1.1 200"), got[:100]
    assert b"data: [DONE]" not in got, "the whole stream came through"
    log = server.log_tail(20000)
    assert log.count("read nothing of its reply for 1 s (--write-timeout)") == 1, log[-2000:]
