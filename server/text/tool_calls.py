"""A reply's text -> (content, tool calls), for the formats of the families we load.

    Hermes / Qwen2.5 / Qwen3 (and our fallback prompt):
        <tool_call>
        {"name": "get_weather", "arguments": {"city": "Paris"}}
        </tool_call>
    Mistral:   [TOOL_CALLS][{"name": "get_weather", "arguments": {...}}, ...]
    Llama 3.1+: the whole reply one JSON object {"name": ..., "parameters": {...}}
               (or "arguments"), optionally after <|python_tag|>, several joined by ";"

A call is (name, arguments as a JSON string). Text that does not parse as a call stays
content: a reply is never lost to a parser. A reply cut by max_tokens (`cut=True`) keeps
its complete calls, and its last Hermes call comes back as a call too, its arguments as
far as they were written (a JSON prefix, as OpenAI returns a cut call), when its name is
decided (written whole, or the one of `names` it began); a marker cut halfway is dropped,
never left in the content.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass

HERMES_OPEN, HERMES_CLOSE = "<tool_call>", "</tool_call>"
MISTRAL = "[TOOL_CALLS]"
PYTHON_TAG = "<|python_tag|>"
MARKERS = (HERMES_OPEN, MISTRAL, PYTHON_TAG)

_HERMES = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)


@dataclass(frozen=True)
class Call:
    name: str
    arguments: str          # a JSON object, as text


def _call(obj) -> Call | None:
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            return None
    if not isinstance(args, dict):
        return None
    return Call(obj["name"], json.dumps(args, ensure_ascii=False))


def _calls(values) -> list[Call] | None:
    out = [_call(v) for v in values]
    return out if out and all(c is not None for c in out) else None


_OPENING = re.compile(r'\{\s*"name"\s*:\s*"(?P<name>[^"\\]*)(?P<closed>")?'
                      r'(?:\s*,\s*"arguments"\s*:\s*(?P<args>.*))?', re.S)


def cut_call(body: str, names=()) -> Call | None:
    """The call a reply cut by max_tokens was writing; body: the text after `<tool_call>`.
    Its name as written when whole, else the one of `names` that begins with what was
    written (or the only one); None while undecided. Arguments: as far as written."""
    body = body.strip()
    j = partial_tail(body, HERMES_CLOSE)
    whole = body[:len(body) - j].rstrip()
    try:
        c = _call(json.loads(whole))
        if c is not None:
            return c
    except json.JSONDecodeError:
        pass
    m = _OPENING.match(body)
    names = list(names or ())
    if m is None:
        return Call(names[0], "") if len(names) == 1 else None
    name = m.group("name")
    if not m.group("closed"):
        fits = [n for n in names if n.startswith(name)]
        if len(fits) != 1:
            return None
        name = fits[0]
    return Call(name, (m.group("args") or "").rstrip())


def parse(text: str, names=(), cut: bool = False) -> tuple[str | None, list[Call]]:
    """-> (content or None, calls); calls empty when the text holds none. cut: the reply
    ended at max_tokens (its last call may be cut; `names`: the tools it may call)."""
    if HERMES_OPEN in text:
        calls, ok, end = [], True, len(text)
        for m in _HERMES.finditer(text):
            try:
                c = _call(json.loads(m.group(1)))
            except json.JSONDecodeError:
                c = None
            if c is None:
                last = not m.group(0).endswith(HERMES_CLOSE) and m.end() == len(text)
                if cut and last:
                    c = cut_call(m.group(1), names)
                    calls += [c] if c is not None else []
                ok = (bool(calls) or cut) and last      # a cut marker never stays content
                end = m.start()
                break
            calls.append(c)
        if ok and (calls or cut):
            content = _HERMES.sub("", text[:end])
            if cut:                         # "...</tool_call>\n<tool_c": no marker in content
                content = content[:len(content) - partial_marker_tail(content)]
            return content.strip() or None, calls
    stripped = text.strip()
    if stripped.startswith(MISTRAL):
        try:
            v = json.loads(stripped[len(MISTRAL):])
            calls = _calls(v if isinstance(v, list) else [v])
            if calls:
                return None, calls
        except json.JSONDecodeError:
            pass
    if stripped.startswith(PYTHON_TAG):
        stripped = stripped[len(PYTHON_TAG):].strip()
    if stripped.startswith("{"):
        try:
            calls = _calls([json.loads(part) for part in _split_semicolons(stripped)])
            if calls:
                return None, calls
        except json.JSONDecodeError:
            pass
    return text, []


def _split_semicolons(text: str) -> list[str]:
    """Llama's several calls: JSON objects joined by ';' (a ';' inside strings stays)."""
    dec = json.JSONDecoder()
    parts, i = [], 0
    while i < len(text):
        _, end = dec.raw_decode(text, i)
        parts.append(text[i:end])
        i = end
        while i < len(text) and text[i] in " \n\t;":
            i += 1
    return parts


def may_start_call(text: str) -> bool:
    """Whether streamed text so far could be (the start of) a tool call: hold it back."""
    s = text.lstrip()
    if not s:
        return True
    if s.startswith("{") or any(s.startswith(m) or m.startswith(s) for m in MARKERS):
        return True
    return False


def marker_at(text: str) -> int:
    """Where a Hermes / Mistral marker starts in text, or -1."""
    hits = [i for i in (text.find(HERMES_OPEN), text.find(MISTRAL)) if i >= 0]
    return min(hits) if hits else -1


def partial_tail(text: str, marker: str) -> int:
    """Length of text's longest suffix that is a proper prefix of marker."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


def partial_marker_tail(text: str) -> int:
    """Length of text's longest suffix that is a proper prefix of a marker."""
    return max(partial_tail(text, m) for m in (HERMES_OPEN, MISTRAL))


def forced_calls(text: str, names, cut: bool) -> list[Call]:
    """A reply the call grammar wrote (tool_choice "required" or a named function): its
    calls, the cut last one included (see cut_call); nothing of it is content."""
    if HERMES_OPEN not in text:             # cut before the marker was whole
        return [Call(names[0], "")] if cut and len(names) == 1 else []
    return parse(text, names, cut)[1]
