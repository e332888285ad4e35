"""The JSON routes take JSON bodies only (server/api/media_type.py): a body sent as
text/plain, as a form (curl -d's default) or with no Content-Type at all is a 415 in
OpenAI's shape naming the type it got. Those are the bodies a web page may POST to any
origin without a CORS preflight, so before this a page the user visited could make a
keyless local server generate (issue 30)."""
from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app

BODIES = {"/v1/completions": {"prompt": "hi", "max_tokens": 2},
          "/v1/chat/completions": {"messages": [{"role": "user", "content": "hi"}],
                                   "max_tokens": 2},
          "/tokenize": {"prompt": "hi"},
          "/detokenize": {"tokens": [1, 2]}}


@pytest.fixture(scope="module")
def client():
    with TestClient(create_app(make_state(FakeScheduler(reply="ab")))) as c:
        yield c


def post(client, path: str, content_type: str | None):
    headers = {} if content_type is None else {"content-type": content_type}
    return client.post(path, content=json.dumps(BODIES[path]).encode(), headers=headers)


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize("content_type", [
    "text/plain",                                   # fetch(url, {method: "POST", body: "..."})
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",            # an HTML form; curl -d without -H
    "multipart/form-data; boundary=x",
    "application/jsonx", "application/json-seq", "text/json", "json"])
def test_a_body_that_is_not_json_is_a_415_naming_its_type(client, path, content_type):
    r = post(client, path, content_type)
    assert r.status_code == 415, (r.status_code, r.text)
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "unsupported_media_type"
    assert err["param"] is None
    assert repr(content_type.split(";")[0].strip()) in err["message"]
    assert "application/json" in err["message"]


@pytest.mark.parametrize("path", sorted(BODIES))
def test_a_body_with_no_content_type_is_a_415(client, path):
    """A Blob with no type is a body a page may send cross-site with no Content-Type."""
    r = post(client, path, None)
    assert r.status_code == 415, (r.status_code, r.text)
    assert "no Content-Type" in r.json()["error"]["message"]


@pytest.mark.parametrize("path", sorted(BODIES))
@pytest.mark.parametrize("content_type", [
    "application/json", "application/json; charset=utf-8", "Application/JSON;Charset=UTF-8",
    "application/json;charset=\"utf-8\"", "application/vnd.api+json",
    "application/merge-patch+json; charset=utf-8"])
def test_json_in_its_forms_is_served(client, path, content_type):
    r = post(client, path, content_type)
    assert r.status_code == 200, (content_type, r.status_code, r.text)


def test_a_charset_other_than_utf8_is_a_415(client):
    r = post(client, "/v1/completions", "application/json; charset=latin-1")
    assert r.status_code == 415 and "latin-1" in r.json()["error"]["message"]


def test_the_openai_client_sends_json():
    """The openai client (and httpx's json=) send application/json: served as before."""
    import httpx
    req = httpx.Request("POST", "http://x/v1/completions", json={"prompt": "hi"})
    assert req.headers["content-type"] == "application/json"


def test_the_document_lists_415_on_the_json_routes(client):
    doc = client.get("/openapi.json").json()
    for path in BODIES:
        assert "415" in doc["paths"][path]["post"]["responses"], path
    assert "415" not in doc["paths"]["/v1/models"]["get"]["responses"]


def test_a_cross_site_json_post_fails_its_preflight(client):
    """The other half: a page that sends application/json cross-site must ask first (a CORS
    preflight), and this server grants no origin, so the browser never sends the POST."""
    r = client.options("/v1/completions", headers={
        "Origin": "http://page.example", "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"})
    assert r.status_code == 405
    assert not [h for h in r.headers if h.lower().startswith("access-control-allow")]
