"""prompt_logprobs once per request, its size bounded, its reply built and rendered off
the event loop (issue 30: prompt_logprobs 20 with n=16 on a 7,000-token prompt made a
35 KB request answer 162 MB, the list copied into all 16 choices, and stalled /health
3.7 s)."""
from __future__ import annotations

import json

from hypothesis import given, settings, strategies as st
from fastapi.testclient import TestClient
from starlette.responses import JSONResponse

from api_fakes import FakeScheduler, make_state
from loop_probe import health_while, serving
from server.api import create_app, slicedjson
from server.api.prompt_logprob_json import MAX_ENTRIES

COMP, CHAT = "/v1/completions", "/v1/chat/completions"
PROMPT = "the quick brown fox " * 350                  # 7,000 tokens (the fake: one a byte)


class ReadyLogprobs(FakeScheduler):
    """The fake, with prompt logprobs worked out before the request (as the engine does
    them on its own thread), not on the event loop while the test times it."""

    def __init__(self, prompt_ids, k, **kw):
        super().__init__(**kw)
        self.plp = tuple((t, -1.0 - j, 1 + j % 3, tuple((t + m, -0.25 - m) for m in range(k)))
                         for j, t in enumerate(prompt_ids[1:]))

    def prompt_logprobs(self, req) -> tuple:
        return self.plp


def _app(sched, context=16384):
    return create_app(make_state(sched, context=context))


def test_the_issues_request_carries_the_list_once():
    ids = [1] + [b + 3 for b in PROMPT.encode()]
    sched = ReadyLogprobs(ids, 20, reply="ab")
    with TestClient(_app(sched)) as c:
        r = c.post(COMP, json={"prompt": PROMPT, "max_tokens": 2, "n": 16, "prompt_logprobs": 20})
    assert r.status_code == 200, r.text[:300]
    choices = r.json()["choices"]
    plp = choices[0]["prompt_logprobs"]             # the fake's top 20 hold the token itself
    assert len(plp) == 7001 and all(len(d) == 20 for d in plp[1:])
    assert all(ch["prompt_logprobs"] is None for ch in choices[1:])
    assert len(r.content) < 12_000_000, len(r.content)          # one copy: about 8 MB


def test_health_answers_while_the_reply_is_built():
    ids = [1] + [b + 3 for b in PROMPT.encode()]
    sched = ReadyLogprobs(ids, 20, reply="ab")
    body = json.dumps({"prompt": PROMPT, "max_tokens": 2, "n": 4, "prompt_logprobs": 20})
    with serving(_app(sched)) as url:
        times, result = health_while(url, lambda c: c.post(
            url + COMP, content=body, headers={"content-type": "application/json"}),
            settle_s=0.05, probes=40, gap_s=0.02)
    assert max(times) < 0.2, times
    assert result and result[0].status_code == 200


def test_past_the_bound_is_a_400_naming_the_field():
    long_prompt = "x" * (MAX_ENTRIES // 21 + 1)          # (tokens - 1) x 21 > MAX_ENTRIES
    sched = FakeScheduler()
    with TestClient(_app(sched, context=32768)) as c:
        r = c.post(COMP, json={"prompt": long_prompt, "max_tokens": 1, "prompt_logprobs": 20})
        assert r.status_code == 400, r.text[:300]
        err = r.json()["error"]
        assert err["param"] == "prompt_logprobs" and f"{MAX_ENTRIES:,}" in err["message"], err
        r = c.post(CHAT, json={"messages": [{"role": "user", "content": long_prompt}],
                               "max_tokens": 1, "prompt_logprobs": 20})
        assert r.status_code == 400 and r.json()["error"]["param"] == "prompt_logprobs"
        # echo with logprobs: each of the n choices starts with the prompt's logprobs
        r = c.post(COMP, json={"prompt": "x" * 1000, "max_tokens": 1, "echo": True,
                               "logprobs": 20, "n": 16})
        assert r.status_code == 400 and r.json()["error"]["param"] == "logprobs", r.text[:300]
        # just under: served
        r = c.post(COMP, json={"prompt": "x" * (MAX_ENTRIES // 21), "max_tokens": 1,
                               "prompt_logprobs": 20})
        assert r.status_code == 200, r.text[:300]
    assert len(sched.started) == 1


_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) \
    | st.text()
_values = st.recursive(_leaf, lambda kids: st.lists(kids, max_size=80)
                       | st.dictionaries(st.text(max_size=4), kids, max_size=5), max_leaves=300)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_sliced_dumps_gives_jsonresponses_bytes(value):
    assert slicedjson.dumps(value) == JSONResponse(value).body
