"""Structured outputs: the request fields that constrain a reply, to one compiled grammar.

OpenAI's `response_format` (json_object, json_schema {name, schema, strict}), vLLM's
`guided_json` / `guided_regex` / `guided_choice` / `guided_grammar` and
`structured_outputs` {json, regex, choice, grammar, json_object}, llama-server's
`json_schema` and `grammar` (GBNF; Lark is taken too). At most one of them per request.
A schema or grammar that passes a limit (server/engine/grammar_limits.py), does not
compile, or fails at its first token is a 400 naming the field and the reason (code
invalid_grammar); every grammar compiler busy for its whole budget is a 503.
"""
from __future__ import annotations

import asyncio

from server.engine.grammar import GrammarError, compile_grammar
from server.engine.grammar_compiler import CompilerBusy
from server.engine.grammar_limits import problem

from .errors import ApiError, invalid


def constraint_spec(body) -> tuple[str, object, str] | None:
    """-> (kind, spec, param) for the one constraint the body asks for, or None."""
    found = []
    rf = getattr(body, "response_format", None)
    if rf is not None and rf.type == "json_object":
        found.append(("json_object", None, "response_format"))
    elif rf is not None and rf.type == "json_schema":
        if rf.json_schema is None or rf.json_schema.schema_ is None:
            raise invalid("response_format of type json_schema needs json_schema.schema",
                          param="response_format.json_schema.schema")
        found.append(("json_schema", rf.json_schema.schema_, "response_format.json_schema.schema"))
    if body.guided_json is not None:
        found.append(("json_schema", body.guided_json, "guided_json"))
    if body.guided_regex is not None:
        found.append(("regex", body.guided_regex, "guided_regex"))
    if body.guided_choice is not None:
        found.append(("choice", body.guided_choice, "guided_choice"))
    if body.guided_grammar is not None:
        found.append(("gbnf", body.guided_grammar, "guided_grammar"))
    so = body.structured_outputs
    if so is not None:
        for kind, value, name in (("json_schema", so.json_, "json"), ("regex", so.regex, "regex"),
                                  ("choice", so.choice, "choice"), ("gbnf", so.grammar, "grammar")):
            if value is not None:
                found.append((kind, value, f"structured_outputs.{name}"))
        if so.json_object:
            found.append(("json_object", None, "structured_outputs.json_object"))
    if body.json_schema is not None:
        found.append(("json_schema", body.json_schema, "json_schema"))
    if body.grammar is not None:
        found.append(("gbnf", body.grammar, "grammar"))
    if len(found) > 1:
        raise invalid(f"{found[0][2]} and {found[1][2]} both constrain the reply; send one",
                      param=found[1][2])
    return found[0] if found else None


def compile_for(state, kind: str, spec, param: str, reasoning: str | None = None):
    """reasoning: None, or where a reasoning model's reply starts ("inside" / "outside"
    its `<think>`): the grammar then applies from the end of the reasoning."""
    try:
        return compile_grammar(state.tokenizer, kind, spec, reasoning)
    except GrammarError as e:
        raise invalid(f"{param} does not compile: {e}", param=param,
                      code="invalid_grammar") from e
    except CompilerBusy as e:
        raise ApiError(503, f"{param}: {e}; try again", param=param, code="grammar_busy",
                       headers={"Retry-After": "1"}) from e


def refuse_past_limits(kind: str, spec, param: str) -> None:
    """The 400 compile_for gives a grammar past a limit (grammar_limits), without compiling:
    a route that renders its prompt before it compiles checks the limits first, so a huge
    schema is refused as a grammar, not as the prompt it would make."""
    why = problem(kind, spec)
    if why:
        raise invalid(f"{param} does not compile: too large: {why}", param=param,
                      code="invalid_grammar")


def request_grammar(state, body, reasoning: str | None = None):
    """The compiled grammar the body asks for, or None (400 on a bad one)."""
    spec = constraint_spec(body)
    return None if spec is None else compile_for(state, *spec, reasoning=reasoning)


async def off_loop(fn, *args):
    """Compiling runs in a worker thread: the first one builds the tokenizer's llguidance
    twin (about a second), and a large schema may take long; the event loop keeps serving."""
    return await asyncio.to_thread(fn, *args)
