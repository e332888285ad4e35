"""Rank 0's HTTP socket (server/api/http_socket.py): claimed and listening before the model
loads, so a second server cannot share the port; --port-retries moves to the next free port
and says so; until serving begins every connection gets a 503 "loading" at once."""
from __future__ import annotations

import socket

import httpx
import pytest

from server.api.http_socket import Loading, PortTaken, claim


def _listening(port: int = 0) -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen()
    return s


def test_a_claimed_port_is_held_while_the_model_loads():
    """A second claim on the same port fails: a bound socket that merely waited (no listen)
    would let another SO_REUSEADDR socket bind beside it on Linux."""
    sock, note = claim("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        assert note is None
        with pytest.raises(PortTaken, match=rf"cannot listen on 127.0.0.1:{port}: .*--port-retries"):
            claim("127.0.0.1", port)
    finally:
        sock.close()


def test_retries_take_the_next_free_port_and_say_so():
    held = _listening()
    port = held.getsockname()[1]
    try:
        sock, note = claim("127.0.0.1", port, retries=10)
        try:
            got = sock.getsockname()[1]
            assert port < got <= port + 10
            assert note == (f"port {port} on 127.0.0.1 is in use (another server there? "
                            f"`make serve` holds 8000); serving on port {got} instead "
                            "(--port-retries 10)")
        finally:
            sock.close()
    finally:
        held.close()


def test_when_every_port_tried_is_taken_the_error_names_the_range():
    first, second = _listening(), None
    port = first.getsockname()[1]
    try:
        second = _listening(port + 1)
    except OSError:
        pytest.skip(f"port {port + 1} is someone else's")
    try:
        with pytest.raises(PortTaken, match=rf"^cannot listen on 127.0.0.1:{port}\.\.{port + 1}: "):
            claim("127.0.0.1", port, retries=1)
    finally:
        first.close()
        second.close()


def test_a_wrong_address_is_not_retried():
    with pytest.raises(PortTaken, match="cannot listen on 10.255.255.1:8000"):
        claim("10.255.255.1", 8000, retries=5)


def test_until_serving_begins_every_request_gets_a_503_loading():
    sock, _ = claim("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    loading = Loading(sock).start()
    try:
        r = httpx.get(url + "/health", timeout=5)
        assert r.status_code == 503 and r.headers["retry-after"] == "2"
        assert r.json() == {"status": "loading",
                            "reason": "foldserve is starting (the ranks meeting, the model loading); retry in a few seconds"}
        r = httpx.post(url + "/v1/chat/completions", timeout=5,
                       json={"messages": [{"role": "user", "content": "hi"}]})
        assert r.status_code == 503
        assert r.json() == {"error": {"message": "foldserve is starting (the ranks meeting, the model loading); retry in a few seconds",
                                      "type": "service_unavailable", "param": None,
                                      "code": "loading"}}
        r = httpx.head(url + "/health", timeout=5)
        assert r.status_code == 503 and r.content == b""
    finally:
        loading.stop()
    # stopped: the socket still listens (uvicorn takes it); a connection now waits for it
    c = socket.create_connection(sock.getsockname(), timeout=5)
    c.close()
    loading.stop()                                  # idempotent
    sock.close()
