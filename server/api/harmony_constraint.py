"""Constrained replies under the harmony format (gpt-oss): a forced tool_choice's call, or a
request's structured output inside the final channel, as one grammar over the reply's
markup (server/text/harmony_grammar.py). The reply may reason first (its analysis
messages are free text); the grammar then holds the call or the answer.

Taken: tool_choice "required" or a named function; response_format json_object /
json_schema, and the JSON schema and choice forms of vLLM's and llama-server's fields.
A regex or a grammar (GBNF / Lark) is refused by name: it would have to be rewritten inside
the channel markup, which this server does not do.
"""
from __future__ import annotations

import json

from server.engine.grammar import JSON_OBJECT, GrammarError, engine_schema
from server.text import harmony_grammar

from .errors import invalid
from .structured import compile_for, constraint_spec
from .tools import ToolPlan, tool_parameters


def _schema(value, param: str) -> dict:
    try:
        schema = json.loads(value) if isinstance(value, str) else value
        if not isinstance(schema, dict):
            raise GrammarError("a JSON schema must be an object")
        return engine_schema(schema)
    except (GrammarError, json.JSONDecodeError) as e:
        raise invalid(f"{param} does not compile: {e}", param=param,
                      code="invalid_grammar") from None


def harmony_constraint(state, body, plan: ToolPlan):
    """The compiled grammar for a harmony reply, or None when nothing constrains it (400
    naming the field for a constraint it cannot take)."""
    tok = state.tokenizer
    if plan.forced:
        text = harmony_grammar.call_grammar(
            tok, plan.chosen, lambda t: _schema(tool_parameters(t["function"]), "tools"))
        return compile_for(state, "lark", text, "tools")
    spec = constraint_spec(body)
    if spec is None:
        return None
    kind, value, param = spec
    if kind == "json_object":
        kind, value = "json_schema", JSON_OBJECT
    if kind == "json_schema":
        value = _schema(value, param)
    elif kind != "choice":
        raise invalid(f"{param}: a {kind} grammar is not taken with the harmony format "
                      "(gpt-oss): its reply's channels would have to be written into it; "
                      "send a JSON schema or choices", param=param)
    return compile_for(state, "lark", harmony_grammar.answer_grammar(tok, kind, value), param)
