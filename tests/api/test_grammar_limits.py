"""Issue 30, item 5 (and issue 36's `root ::= "a" root`): grammars that passed validation
and failed at the first token answered 500 with llguidance's state dump. Through the API
app with the real tokenizer (the scheduler is the fake one: these never reach it), each
is now a 400 in OpenAI's shape naming the field, code invalid_grammar, with a short
reason: the limit and its number where a limit refuses it, else the engine's one line."""
from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from api_fakes import make_state
from server.api import create_app

CHAT = "/v1/chat/completions"
MSGS = [{"role": "user", "content": "hi"}]
INTERNALS = ("<", "Tokens:", "Parser:", "backtrace", "\n")


@pytest.fixture(scope="module")
def client():
    from server.engine.locate import ModelNotFound, default_gguf
    from server.text.tokenizer import Tokenizer
    try:
        tok = Tokenizer.from_gguf(default_gguf())
    except ModelNotFound as e:
        pytest.skip(str(e))
    state = make_state()
    state.tokenizer = tok
    with TestClient(create_app(state)) as c:
        yield c


def refused(client, body: dict, param: str) -> str:
    r = client.post(CHAT, json={"messages": MSGS, "max_tokens": 2, **body})
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert (err["type"], err["param"], err["code"]) == ("invalid_request_error", param,
                                                        "invalid_grammar"), err
    assert not any(s in err["message"] for s in INTERNALS), err["message"]
    assert len(err["message"]) < 400, err["message"]
    return err["message"]


def schema(s: dict) -> dict:
    return {"response_format": {"type": "json_schema", "json_schema": {"name": "s", "schema": s}}}


def test_a_ref_cycle_without_a_type_fails_at_its_first_token(client):
    cycle = {"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}
    msg = refused(client, schema(cycle), "response_format.json_schema.schema")
    assert "first token" in msg


def test_a_rule_that_never_ends_fails_at_its_first_token(client):
    msg = refused(client, {"grammar": 'root ::= "a" root'}, "grammar")
    assert "first token" in msg


def test_nested_repetitions_are_refused_by_their_product(client):
    msg = refused(client, {"guided_regex": "(x{1000}){1000}"}, "guided_regex")
    assert "1000000" in msg and "at most 10000" in msg


def test_a_hundred_thousand_choices_are_refused_at_once(client):
    t = time.monotonic()
    msg = refused(client, {"guided_choice": [f"option {i}" for i in range(100_000)]},
                  "guided_choice")
    assert "100000 options; at most 10000" in msg
    assert time.monotonic() - t < 5          # the engine took 12 s, then panicked


def test_a_two_thousand_rule_lark_chain_is_refused_by_its_rule_count(client):
    lark = "start: r0\n" + "".join(f'r{i}: "a" r{i + 1} | "b"\n' for i in range(2000)) + 'r2000: "c"\n'
    msg = refused(client, {"guided_grammar": lark}, "guided_grammar")
    assert "2002 rules; at most 1000" in msg


def test_a_gbnf_rule_never_defined_is_a_400(client):
    refused(client, {"grammar": "root ::= nope"}, "grammar")


def test_grammars_within_the_limits_still_pass(client):
    for body in ({"guided_choice": ["yes", "no"]}, {"guided_regex": r"\d{3}-\d{4}"},
                 {"grammar": 'root ::= "a" | "b" root'},
                 schema({"type": "object", "properties": {"x": {"type": "integer"}},
                         "required": ["x"]})):
        r = client.post(CHAT, json={"messages": MSGS, "max_tokens": 2, **body})
        assert r.status_code == 200, (body, r.text)


def test_a_tools_schema_past_a_limit_is_a_400_naming_tools(client):
    d = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"type": "null"}]} for i in range(1500)}
    d["d1500"] = {"type": "null"}
    tools = [{"type": "function", "function": {"name": "f", "parameters": {
        "$defs": d, "$ref": "#/$defs/d0"}}}]
    msg = refused(client, {"tools": tools, "tool_choice": "required"}, "tools")
    assert "1501 $defs / definitions; at most 1000" in msg
