"""docs/api.md's field table names every request field we parse and every field we refuse;
each refused field, set to something, is a 400 naming it."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import create_app
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
