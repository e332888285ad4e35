"""CORS: --allowed-origins names the sites whose pages may read this server; by default
none may. A browser's preflight passes for an allowed origin (before the key check), is
refused for another; an allowed origin's replies carry Access-Control-Allow-Origin."""
from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app
from server.api.cors import parse_origins

SITE = "http://localhost:3000"
PREFLIGHT = {"Origin": SITE, "Access-Control-Request-Method": "POST",
             "Access-Control-Request-Headers": "authorization, content-type, x-stainless-os"}
CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}


def client(origins=(), api_key=None) -> TestClient:
    return TestClient(create_app(make_state(FakeScheduler(), allowed_origins=origins,
                                            api_keys=(api_key,) if api_key else ())))


def test_by_default_no_other_site_may_read():
    with client() as c:
        r = c.options("/v1/chat/completions", headers=PREFLIGHT)
        assert "access-control-allow-origin" not in r.headers
        r = c.post("/v1/chat/completions", json=CHAT, headers={"Origin": SITE})
        assert r.status_code == 200 and "access-control-allow-origin" not in r.headers


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/completions", "/v1/models",
                                  "/v1/messages", "/v1/responses", "/tokenize"])
def test_an_allowed_origins_preflight_passes_before_the_key_check(path):
    with client((SITE,), api_key="k") as c:
        r = c.options(path, headers=PREFLIGHT)
    assert r.status_code == 204, r.text
    assert r.headers["access-control-allow-origin"] == SITE
    assert r.headers["access-control-allow-methods"] == "GET, POST, OPTIONS"
    allowed = [h.strip() for h in r.headers["access-control-allow-headers"].split(",")]
    for h in ("authorization", "content-type", "x-api-key", "anthropic-version", "x-stainless-os"):
        assert h in allowed
    assert "Origin" in r.headers["vary"]


def test_an_allowed_origin_reads_replies_and_errors():
    with client((SITE,), api_key="k") as c:
        r = c.post("/v1/chat/completions", json=CHAT,
                   headers={"Origin": SITE, "Authorization": "Bearer k"})
        assert r.status_code == 200 and r.headers["access-control-allow-origin"] == SITE
        r = c.post("/v1/chat/completions", json=CHAT, headers={"Origin": SITE})
        assert r.status_code == 401 and r.headers["access-control-allow-origin"] == SITE
        r = c.post("/v1/chat/completions", json={**CHAT, "stream": True},
                   headers={"Origin": SITE, "Authorization": "Bearer k"})
        assert r.headers["access-control-allow-origin"] == SITE


def test_another_origin_is_refused():
    with client((SITE,)) as c:
        r = c.options("/v1/chat/completions", headers={**PREFLIGHT, "Origin": "https://evil.example"})
        assert r.status_code == 403 and r.json()["error"]["code"] == "origin_not_allowed"
        assert "access-control-allow-origin" not in r.headers
        r = c.post("/v1/chat/completions", json=CHAT, headers={"Origin": "https://evil.example"})
        assert "access-control-allow-origin" not in r.headers


def test_star_allows_every_site():
    with client(("*",)) as c:
        r = c.options("/v1/chat/completions", headers={**PREFLIGHT, "Origin": "https://x.example"})
        assert r.status_code == 204 and r.headers["access-control-allow-origin"] == "*"


def test_parse_origins():
    assert parse_origins(["http://a:1,http://b/", "http://c"]) == ("http://a:1", "http://b", "http://c")
    assert parse_origins(['["*"]']) == ("*",)
    assert parse_origins(None) == ()
    with pytest.raises(ValueError):
        parse_origins(["localhost:3000"])
