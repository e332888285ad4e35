"""Names: --served-model-name (several), --chat-template, --version, GET /version,
GET and POST /ping, HEAD /health; a 405 names every method of its path."""
from __future__ import annotations

import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server import __version__
from server.api import create_app
from server.serve import read_chat_template


def test_served_model_names_all_answer():
    state = make_state(FakeScheduler(reply="ab"), served_names=("alpha", "beta"))
    state.model_name = "alpha"
    with TestClient(create_app(state)) as c:
        assert [m["id"] for m in c.get("/v1/models").json()["data"]] == ["alpha", "beta"]
        assert c.get("/v1/models/beta").json()["id"] == "beta"
        r = c.post("/v1/completions", json={"model": "beta", "prompt": "x", "max_tokens": 2})
        assert r.status_code == 200 and r.json()["model"] == "alpha"
        r = c.post("/v1/completions", json={"model": "fake-model", "prompt": "x", "max_tokens": 2})
        assert r.status_code == 404


def test_version_ping_and_head_health():
    with TestClient(create_app(make_state(FakeScheduler(), api_keys=("k",)))) as c:
        assert c.get("/version").json() == {"version": __version__}
        assert c.get("/ping").status_code == 200
        r = c.post("/ping")                 # vLLM serves both (SageMaker posts)
        assert r.status_code == 200 and r.content == b""
        r = c.head("/health")
        assert r.status_code == 200 and r.content == b""


def test_ping_is_503_when_a_rank_is_gone():
    sched = FakeScheduler()
    sched.stats = lambda: {"ranks_ok": False}
    with TestClient(create_app(make_state(sched))) as c:
        assert c.get("/ping").status_code == 503 and c.post("/ping").status_code == 503


def test_405_allow_names_every_route_of_the_path():
    """Two routes on one path (GET + HEAD /health, GET + POST /ping): Starlette's own 405
    named the first one's method only."""
    with TestClient(create_app(make_state(FakeScheduler()))) as c:
        for method, path, allow in [("PUT", "/health", "GET, HEAD"), ("POST", "/health", "GET, HEAD"),
                                    ("PUT", "/ping", "GET, POST"), ("DELETE", "/version", "GET"),
                                    ("GET", "/v1/completions", "POST")]:
            r = c.request(method, path)
            assert r.status_code == 405, (method, path)
            assert r.headers["allow"] == allow, (method, path, r.headers.get("allow"))
            assert r.json()["error"]["type"] == "invalid_request_error"


def test_chat_template_override_is_used(tmp_path):
    state = make_state(FakeScheduler(reply="ab"),
                       chat_template="{% for m in messages %}[[{{ m['content'] }}]]{% endfor %}")
    state.render_chat = None
    sched = state.scheduler
    with TestClient(create_app(state)) as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}],
                                                  "max_tokens": 2})
    assert r.status_code == 200, r.text
    assert bytes(t - 3 for t in sched.started[0].prompt_ids).decode() == "[[hi]]"
    f = tmp_path / "t.jinja"
    f.write_text("{{ messages[0]['content'] }}")
    assert read_chat_template(str(f)) == "{{ messages[0]['content'] }}"
    assert read_chat_template("{{ x }}") == "{{ x }}"
    with pytest.raises(ValueError):
        read_chat_template(str(tmp_path / "missing.jinja"))


def test_cli_version():
    out = subprocess.run([sys.executable, "-m", "server.cli", "--version"], capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == f"foldserve {__version__}"
