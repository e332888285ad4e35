"""Stop strings bounded (sampling.MAX_STOPS, MAX_STOP_CHARS) and matched without holding the
event loop (issue 30: 100 stops of 5,000 characters stalled /health up to 12 s, 380 of
10,000 froze the API for minutes).

The scheduler hands a stream its tokens through a queue; when tokens are waiting there,
the stream's loop takes them one after another without giving the event loop a turn, so
the matching of a burst is one stall. BurstScheduler replies so: every token at once."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from loop_probe import health_while, serving
from server.api import create_app
from server.api.sampling import MAX_STOP_CHARS, MAX_STOPS
from server.requests import TokenEvent

COMP, CHAT = "/v1/completions", "/v1/chat/completions"


class BurstScheduler(FakeScheduler):
    """Replies "a" x max_tokens, the tokens already waiting (no await between them)."""

    async def generate(self, req):
        self.started.append(req)
        n = req.params.max_tokens
        for i in range(n):
            yield TokenEvent(3 + ord("a"), logprob=-0.5, prompt_tokens=len(req.prompt_ids),
                             finish_reason="length" if i == n - 1 else None)


def adversarial_stops(count: int, length: int) -> list[str]:
    """All but one never get far; the last is a run of "a" that a reply of a's keeps
    growing (the held tail as long as it gets)."""
    return ["b" * (length - 6) + f"{i:06d}" for i in range(count - 1)] + ["a" * (length - 1) + "b"]


@pytest.mark.parametrize("path, base", [
    (COMP, {"prompt": "x"}), (CHAT, {"messages": [{"role": "user", "content": "x"}]})])
@pytest.mark.parametrize("stop, says", [
    (["s"] * (MAX_STOPS + 1), f"at most {MAX_STOPS} stop strings"),
    ("a" * (MAX_STOP_CHARS + 1), f"at most {MAX_STOP_CHARS} characters"),
    (["ok", "é" * (MAX_STOP_CHARS + 1)], f"at most {MAX_STOP_CHARS} characters"),
])
def test_too_many_or_too_long_stops_are_a_400_naming_stop(path, base, stop, says):
    sched = FakeScheduler()
    with TestClient(create_app(make_state(sched))) as c:
        r = c.post(path, json={**base, "max_tokens": 4, "stop": stop})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["param"] == "stop" and says in err["message"], err
    assert sched.started == []


def test_stops_at_the_bound_are_served():
    stops = adversarial_stops(MAX_STOPS, MAX_STOP_CHARS)
    with TestClient(create_app(make_state(FakeScheduler(reply="a"), context=4096))) as c:
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 600, "stop": stops})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == "a" * 600
        r = c.post(COMP, json={"prompt": "x", "max_tokens": 40, "stop": ["aaa" + "a" * 30, "a" * 7]})
        assert r.json()["choices"][0]["text"] == "" and r.json()["choices"][0]["finish_reason"] == "stop"


def test_the_issues_stops_are_refused_and_health_answers_throughout():
    """Issue 30's request: 100 stops of 5,000 characters against a reply that keeps them
    in play. Before the bound it was served, and its matching held the loop for seconds
    at a time."""
    body = json.dumps({"prompt": "x", "max_tokens": 3000, "stream": True,
                       "stop": adversarial_stops(100, 5000)}).encode()
    app = create_app(make_state(BurstScheduler(), context=4096))
    with serving(app) as url:
        times, result = health_while(url, lambda c: c.post(
            url + COMP, content=body, headers={"content-type": "application/json"}))
    assert max(times) < 0.2, times
    assert result and result[0].status_code == 400, result
    assert result[0].json()["error"]["param"] == "stop"


def test_health_answers_while_stops_at_the_bound_are_matched():
    """The most stops the bound lets through, a reply of 1,000 tokens in a burst that
    keeps the longest in play: the loop is never held for long (the quadratic matcher
    held it for seconds)."""
    body = json.dumps({"prompt": "x", "max_tokens": 1000, "stream": True,
                       "stop": adversarial_stops(MAX_STOPS, MAX_STOP_CHARS)}).encode()
    app = create_app(make_state(BurstScheduler(), context=4096))
    with serving(app) as url:
        times, result = health_while(url, lambda c: c.post(
            url + COMP, content=body, headers={"content-type": "application/json"}),
            settle_s=0.05, gap_s=0.02)
    assert max(times) < 0.2, times
    assert result and result[0].status_code == 200
