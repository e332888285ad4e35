"""A reply's text -> (content, tool calls), for the formats of the families we load.

    Hermes / Qwen2.5 / Qwen3 (and our fallback prompt):
        <tool_call>
        {"name": "get_weather", "arguments": {"city": "Paris"}}
        </tool_call>
    Mistral:   [TOOL_CALLS][{"name": "get_weather", "arguments": {...}}, ...]
    Llama 3.1+: the whole reply one JSON object {"name": ..., "parameters": {...}}
               (or "arguments"), optionally after <|python_tag|>, several joined by ";"

A call is (name, arguments as a JSON string). Text that does not parse as a call stays
content: a reply is never lost to a parser (a last Hermes call cut off by max_tokens is
dropped, the complete ones before it kept).
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


def parse(text: str) -> tuple[str | None, list[Call]]:
    """-> (content or None, calls); calls empty when the text holds none."""
    if HERMES_OPEN in text:
        calls, ok, cut = [], True, len(text)
        for m in _HERMES.finditer(text):
            try:
                c = _call(json.loads(m.group(1)))
            except json.JSONDecodeError:
                c = None
            if c is None:
                # a last call cut off (finish_reason "length") is dropped, the rest kept
                ok = bool(calls) and not m.group(0).endswith(HERMES_CLOSE) and m.end() == len(text)
                cut = m.start()
                break
            calls.append(c)
        if ok and calls:
            content = _HERMES.sub("", text[:cut]).strip()
            return content or None, calls
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


def partial_marker_tail(text: str) -> int:
    """Length of text's longest suffix that is a proper prefix of a marker."""
    best = 0
    for m in (HERMES_OPEN, MISTRAL):
        for n in range(min(len(m) - 1, len(text)), best, -1):
            if text.endswith(m[:n]):
                best = n
                break
    return best
