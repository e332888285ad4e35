"""Grammars over a harmony reply (gpt-oss): a forced tool call or a constrained answer,
written as Lark for llguidance with the reply's channel markup around it.

The prompt ends with `<|start|>assistant`; a constrained reply may first write any number
of analysis (reasoning) or commentary (preamble) messages, each closed by
`<|end|><|start|>assistant`, then exactly one of

    a call:    <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>ARGS
    an answer: <|channel|>final<|message|>ANSWER

ARGS follows the tool's parameters schema; ANSWER the request's JSON schema (or any JSON
object, or one of its choices). Nothing may follow: the sampler then allows only the stop
tokens (<|call|> / <|return|>). A vocabulary with the markers as added tokens (gpt-oss's)
gets them as tokens (`<|channel|>` in Lark, never spelt out by text tokens, so a message's
text is free); a vocabulary without them gets them as text, and a message's text then
holds no `<` (it cannot run into a marker). The text parts are server/text/harmony.py's
markers and header forms, which parse such a reply back into reasoning, content and calls.
"""
from __future__ import annotations

import json

from server.text.lark_markers import lark_markers
from server.text.harmony import CHANNEL, CONSTRAIN, END, MESSAGE, START

_MARKERS = (START, CHANNEL, MESSAGE, END, CONSTRAIN)


def _markers(tok) -> dict[str, str]:
    return lark_markers(tok, _MARKERS)


def _frame(tok, answer: str) -> str:
    """The reply: messages before, then `answer` (a Lark alternative list, rule `answer`)."""
    m = _markers(tok)
    text = "/(.|\\n)*/" if m[CHANNEL] == CHANNEL else "/[^<]*/"
    return (f'start: (msg {m[END]} {m[START]} "assistant")* answer\n'
            f'msg: {m[CHANNEL]} ("analysis" | "commentary") {m[MESSAGE]} TEXT\n'
            f"TEXT: {text}\n"
            f"answer: {answer}\n")


def call_grammar(tok, tools: list, schema_of) -> str:
    """One call to one of `tools` (OpenAI tool dicts); schema_of(tool) -> the arguments'
    schema as llguidance takes it."""
    m = _markers(tok)
    alts = [f'{m[CHANNEL]} {json.dumps("commentary to=functions." + t["function"]["name"] + " ")} '
            f'{m[CONSTRAIN]} "json" {m[MESSAGE]} %json {json.dumps(schema_of(t))}' for t in tools]
    return _frame(tok, " | ".join(alts))


def answer_grammar(tok, kind: str, spec) -> str:
    """The final channel's text as `kind` says: json_schema (spec: the schema as llguidance
    takes it) or choice (spec: the strings)."""
    m = _markers(tok)
    head = f'{m[CHANNEL]} "final" {m[MESSAGE]}'
    if kind == "json_schema":
        return _frame(tok, f"{head} %json {json.dumps(spec)}")
    if kind == "choice":
        return _frame(tok, f"{head} ({' | '.join(json.dumps(str(c)) for c in spec)})")
    raise ValueError(f"no harmony answer grammar for {kind!r}")
