"""GLM's tool calls (GLM-4.5, 4.6, 4.7, 5.x): the format its own chat template writes.

    <tool_call>get_weather
    <arg_key>city</arg_key>
    <arg_value>Paris</arg_value>
    <arg_key>days</arg_key>
    <arg_value>3</arg_value>
    </tool_call>

(GLM-4.7 and later write the same without the newlines.) A call is read as GLM's own
parser and vLLM's `glm45` tool parser read it: the name is the text after `<tool_call>` up
to the first newline or `<arg_key>`, stripped; the pairs are `<arg_key>K</arg_key>`,
optional whitespace, `<arg_value>V</arg_value>`, the key stripped. A value whose parameter
the tool's schema types `"type": "string"` is the raw text as written (whitespace kept);
any other value is parsed from its stripped text as JSON, else as a Python literal (the
template writes `tojson` of a non-string, a model sometimes writes `True`), else it stays
the raw string. The arguments are json.dumps of the pairs' object (tool_calls.Call's form).

`parse` splits a whole reply into (content, calls); text outside the calls is content,
nothing of the markup stays in it. A reply cut by max_tokens (`cut`) keeps its complete
calls, and its last call comes back when its name is whole, with its arguments as far as
written (a JSON object's prefix: the complete pairs, no closing brace), as tool_calls.py
returns a cut Hermes call; a cut marker never stays content.
"""
from __future__ import annotations

import ast
import json
import re

from server.text.tool_calls import Call, HERMES_CLOSE, HERMES_OPEN, partial_tail

ARG_KEY, ARG_KEY_END = "<arg_key>", "</arg_key>"
ARG_VALUE, ARG_VALUE_END = "<arg_value>", "</arg_value>"
OPEN, CLOSE = HERMES_OPEN, HERMES_CLOSE

# --tool-call-parser's choices (server/api/tools.tool_format): auto (from the template),
# hermes (JSON in <tool_call>, and the other JSON formats of tool_calls.py), glm45 / glm47
# (this format; vLLM's names)
PARSER_NAMES = ("auto", "hermes", "glm45", "glm47")

_PAIR = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.S)
_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.S)


def is_glm_template(template) -> bool:
    """A chat template that writes GLM's tool calls (it spells `<arg_key>`)."""
    return isinstance(template, str) and ARG_KEY in template


def resolve(name: str, template) -> str:
    """--tool-call-parser -> "glm" or "hermes"; auto: "glm" for a GLM template."""
    if name in ("glm45", "glm47"):
        return "glm"
    if name == "hermes":
        return "hermes"
    if name != "auto":
        raise ValueError(f"unknown tool-call parser {name!r}; one of {', '.join(PARSER_NAMES)}")
    return "glm" if is_glm_template(template) else "hermes"


def string_params(tools, name: str) -> set[str]:
    """The parameters of tool `name` that its schema types as strings (raw values)."""
    for t in tools or ():
        fn = t.get("function", t)
        if fn.get("name") == name:
            props = (fn.get("parameters") or {}).get("properties") or {}
            return {k for k, v in props.items() if isinstance(v, dict) and v.get("type") == "string"}
    return set()


def value(raw: str, is_string: bool):
    """One <arg_value>'s text -> its value (see the module's rule)."""
    if is_string:
        return raw
    s = raw.strip()
    try:
        return json.loads(s)
    except json.JSONDecodeError:
        pass
    try:
        v = ast.literal_eval(s)
        json.dumps(v)
        return v
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return raw


def _name(body: str) -> str | None:
    """The call's name: up to the first newline or <arg_key>; None while not yet ended."""
    ends = [i for i in (body.find("\n"), body.find(ARG_KEY)) if i >= 0]
    return body[:min(ends)].strip() if ends else None


def parse_body(body: str, tools=()) -> Call | None:
    """A whole call's text between <tool_call> and </tool_call> -> a Call, or None when it
    has no name."""
    name = _name(body)
    if name is None:
        name, rest = body.strip(), ""           # a call without arguments: "<tool_call>now</tool_call>"
    else:
        rest = body[body.find(name) + len(name):]
    if not name or "<" in name:
        return None
    strings = string_params(tools, name)
    args = {}
    for k, v in _PAIR.findall(rest):
        k = k.strip()
        args[k] = value(v, k in strings)
    return Call(name, json.dumps(args, ensure_ascii=False))


def cut_body(body: str, tools=()) -> Call | None:
    """The call a reply cut by max_tokens was writing (body: after <tool_call>): None until
    its name is whole; its arguments: the complete pairs as a JSON object without its
    closing brace."""
    name = _name(body)
    if not name or "<" in name:
        return None
    strings = string_params(tools, name)
    args = {k.strip(): value(v, k.strip() in strings) for k, v in _PAIR.findall(body)}
    return Call(name, json.dumps(args, ensure_ascii=False)[:-1])


def parse(text: str, tools=(), cut: bool = False) -> tuple[str | None, list[Call]]:
    """-> (content or None, calls) of a whole reply (tools: the request's OpenAI tool
    dicts, for the parameters' types). No well-formed call: the text is content as written
    (but a cut reply's unfinished markup, dropped)."""
    calls, pieces, pos = [], [], 0
    for m in _CALL.finditer(text):
        c = parse_body(m.group(1), tools)
        if c is None:
            continue
        pieces.append(text[pos:m.start()])
        calls.append(c)
        pos = m.end()
    tail = text[pos:]
    if cut:
        i = tail.find(OPEN)
        if i >= 0:
            c = cut_body(tail[i + len(OPEN):], tools)
            calls += [c] if c is not None else []
            tail = tail[:i]
        else:
            tail = tail[:len(tail) - partial_tail(tail, OPEN)]
    if not calls and not cut:
        return text, []
    content = "".join(pieces) + tail
    return content.strip() or None, calls


def forced_calls(text: str, tools, names, cut: bool) -> list[Call]:
    """A reply the GLM call grammar wrote: its calls (a cut last one included); nothing of
    it is content."""
    if OPEN not in text:
        return [Call(names[0], "")] if cut and len(names) == 1 else []
    return parse(text, tools, cut)[1]
