"""docs/api.md's field table names every request field we parse and every field we refuse;
each refused field, set to something, is a 400 naming it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app
from server.api import messages_request, responses_request
from server.api.schemas import ChatRequest, CompletionRequest
from server.api.unsupported import CHAT_UNSUPPORTED, UNSUPPORTED

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


def table_fields() -> set[str]:
    text = DOC.read_text()
    table = text[text.index("## Every request field"):]
    names = set()
    for line in table.splitlines():
        if line.startswith("| `"):
            names |= set(re.findall(r"`([a-z_\.]+)`", line.split("|")[1]))
    return names


def test_every_field_is_in_the_table():
    names = table_fields()
    ours = set()
    for model in (CompletionRequest, ChatRequest):
        for name, f in model.model_fields.items():
            ours.add(f.alias or name)
    missing = sorted((ours | set(UNSUPPORTED) | set(CHAT_UNSUPPORTED)) - names -
                     {"stream_options"} - {"stream_options.include_usage"})
    assert not missing, f"docs/api.md's table lacks {missing}"


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_refused_fields_name_themselves(name):
    with TestClient(create_app(make_state(FakeScheduler()))) as c:
        r = c.post("/v1/completions", json={"prompt": "x", "max_tokens": 1, name: 12345})
    assert r.status_code == 400 and r.json()["error"]["param"] == name, r.text


@pytest.mark.parametrize("name", sorted(CHAT_UNSUPPORTED))
def test_refused_chat_fields_name_themselves(name):
    with TestClient(create_app(make_state(FakeScheduler()))) as c:
        r = c.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "x"}],
                                                  "max_tokens": 1, name: 12345})
    assert r.status_code == 400 and r.json()["error"]["param"] == name, r.text


def section_table(heading: str) -> set[str]:
    """The backquoted names in the first column of a section's table."""
    text = DOC.read_text()
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    names = set()
    for line in text[start:end if end > 0 else len(text)].splitlines():
        if line.startswith("| `") or line.startswith("| blocks `"):
            names |= set(re.findall(r"`([a-z_\.]+)`", line.split("|")[1]))
    return names


AGENT_ROUTES = {"/v1/messages": messages_request, "/v1/responses": responses_request}


def test_the_messages_and_responses_tables_name_every_field():
    for heading, model, module, extra in (
            ("## The Messages API", messages_request.MessagesRequest, messages_request,
             messages_request.BLOCKS_REFUSED),
            ("## The Responses API", responses_request.ResponsesRequest, responses_request, {})):
        fields = {f.alias or n for n, f in model.model_fields.items()}
        missing = sorted((fields | set(module.REFUSED) | set(extra)) - section_table(heading))
        assert not missing, f"docs/api.md's {heading!r} table lacks {missing}"
        assert set(module.REFUSED) <= fields      # declared, so the no-op values are taken


@pytest.mark.parametrize("path,name", [(path, name) for path, module in AGENT_ROUTES.items()
                                       for name in sorted(module.REFUSED)])
def test_refused_agent_fields_name_themselves(path, name):
    base = ({"max_tokens": 1, "messages": [{"role": "user", "content": "x"}]}
            if path == "/v1/messages" else {"input": "x", "max_output_tokens": 1})
    with TestClient(create_app(make_state(FakeScheduler()))) as c:
        r = c.post(path, json={**base, name: 12345})
        assert r.status_code == 400 and name in r.text, r.text
        if path == "/v1/responses":
            assert r.json()["error"]["param"] == name, r.text
            assert r.json()["error"]["code"] == "unsupported_field", r.text
        for ok in AGENT_ROUTES[path].REFUSED[name][0]:     # the values that ask for nothing
            r = c.post(path, json={**base, name: ok})
            assert r.status_code == 200, (name, ok, r.text)
