"""The drain (server/api/drain.py, http_server.DrainingServer) on a real uvicorn with the
fake scheduler: on the signal a new request gets a 503 shutting_down with Retry-After (its
connection accepted, not refused) and /health a 503 "stopping"; a running stream that ends
within --shutdown-timeout ends as usual; one that does not gets an error event and [DONE],
a whole reply the 503 JSON; then the server stops, with no error logged (issue 30, item 3)."""
from __future__ import annotations

import json
import logging
import signal
import socket
import threading
import time

import httpx
import pytest
import uvicorn

from api_fakes import FakeScheduler, make_state
from server.api import create_app
from server.api.http_server import DrainingServer
from server.api.protocol import ConnectionLimits, guarded_protocol

GRACE = 1.5


@pytest.fixture
def live(caplog):
    sched = FakeScheduler(delay=0.01)               # 100 tokens a second a stream
    state = make_state(sched, context=1_000_000, shutdown_timeout=GRACE)
    limits = ConnectionLimits(header_timeout=5.0, max_connections=64)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(create_app(state), log_level="info", lifespan="off",
                            http=guarded_protocol(limits), timeout_graceful_shutdown=2)
    srv = DrainingServer(config, state)
    t = threading.Thread(target=srv.run, kwargs={"sockets": [sock]}, daemon=True)
    caplog.set_level(logging.INFO)
    t.start()
    while not srv.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", srv, t, sched, state
    srv.should_exit = True
    t.join(10)


def _stream(url: str, max_tokens: int, out: dict, key: str) -> None:
    events = []
    try:
        with httpx.stream("POST", url + "/v1/completions", timeout=30, json={
                "prompt": "x", "max_tokens": max_tokens, "stream": True}) as r:
            for line in r.iter_lines():
                if line.startswith("data: "):
                    events.append(line[6:])
                    out.setdefault(key + "_first", time.monotonic())
    except httpx.HTTPError as e:                    # a cut connection
        events.append(f"{type(e).__name__}: {e}")
    out[key] = events
    out[key + "_at"] = time.monotonic()


def _whole(url: str, out: dict) -> None:
    r = httpx.post(url + "/v1/completions", timeout=30, json={"prompt": "x", "max_tokens": 100_000})
    out["whole"] = r
    out["whole_at"] = time.monotonic()


def test_sigterm_drains_then_stops(live, caplog):
    url, srv, thread, sched, state = live
    out: dict = {}
    threads = [threading.Thread(target=_stream, args=(url, 60, out, "short")),
               threading.Thread(target=_stream, args=(url, 100_000, out, "long")),
               threading.Thread(target=_whole, args=(url, out))]
    for t in threads:
        t.start()
    while len(sched.started) < 3 or "short_first" not in out or "long_first" not in out:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.handle_exit(signal.SIGTERM, None)
    time.sleep(0.2)
    new = httpx.post(url + "/v1/completions", json={"prompt": "x", "max_tokens": 2}, timeout=5)
    health = httpx.get(url + "/health", timeout=5)
    for t in threads:
        t.join(15)
    thread.join(15)
    stopped = time.monotonic() - t0
    assert not thread.is_alive(), "the server did not stop"

    assert new.status_code == 503 and new.headers["retry-after"] == "1", new.text
    assert new.json()["error"]["code"] == "shutting_down", new.text
    assert new.headers["connection"] == "close"
    assert health.status_code == 503 and health.json()["status"] == "stopping", health.text
    # the short stream finished as usual, within the grace
    short = out["short"]
    assert short[-1] == "[DONE]" and json.loads(short[-2])["choices"][0]["finish_reason"] == "length"
    assert out["short_at"] - t0 < GRACE
    # the long one: an error event, then [DONE], at the grace
    long = out["long"]
    assert long[-1] == "[DONE]", long[-3:]
    err = json.loads(long[-2])["error"]
    assert err["code"] == "shutting_down" and "--shutdown-timeout" in err["message"], err
    assert GRACE - 0.1 <= out["long_at"] - t0 < GRACE + 1.5, out["long_at"] - t0
    # the whole reply: the 503 JSON with Retry-After
    whole = out["whole"]
    assert whole.status_code == 503 and whole.headers["retry-after"] == "1", whole.text
    assert whole.json()["error"]["code"] == "shutting_down"
    assert stopped < GRACE + 3, stopped
    assert state.backlog.count == 0
    bad = [r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info]
    assert not bad, [r.getMessage() for r in bad]
    print(f"stopped {stopped:.2f} s after the signal (grace {GRACE} s); long stream ended at "
          f"{out['long_at'] - t0:.2f} s")


def test_a_second_signal_ends_the_running_requests_at_once(live):
    url, srv, thread, sched, state = live
    out: dict = {}
    t = threading.Thread(target=_stream, args=(url, 100_000, out, "long"))
    t.start()
    while "long_first" not in out:
        time.sleep(0.01)
    t0 = time.monotonic()
    srv.handle_exit(signal.SIGINT, None)
    time.sleep(0.1)
    srv.handle_exit(signal.SIGINT, None)
    t.join(10)
    thread.join(10)
    assert not thread.is_alive()
    assert out["long"][-1] == "[DONE]"
    assert json.loads(out["long"][-2])["error"]["code"] == "shutting_down"
    assert out["long_at"] - t0 < GRACE / 2, out["long_at"] - t0
