"""json.loads of a large body, and json.dumps of a large reply, a slice at a time.

json.loads parses a body in one C call that holds the GIL: 59 ms of CPU for a 3.7 MB chat
of 110,000 messages, 100-150 ms of wall time on the text worker (at a lower priority, on a
busy host), in which the event loop's thread could not answer /health
(tests/e2e/test_hardening.py). `loads` gives the same value: the top-level object is walked
here, each member's value parsed by json's own C scanner, and a value that is an array
(messages, a prompt of token ids) an element at a time; between slices of ITEMS_AT_ONCE
elements the worker lets the GIL go.

The same value, and the same errors: the walk follows json.decoder's grammar for an object
and an array, and on anything it does not take (bad JSON, a body that is not an object,
nesting too deep) it hands the text to json.loads, whose error or value is the answer.

`dumps` is the way back, for replies of megabytes (prompt_logprobs, logprobs): the bytes
Starlette's JSONResponse renders, with each list longer than LONG written an element at
a time by json's C encoder, the GIL let go every ITEMS_AT_ONCE elements.
"""
from __future__ import annotations

import json
import json.decoder
import time

ITEMS_AT_ONCE = 2048

_WS = json.decoder.WHITESPACE.match          # [ \t\n\r]*, as json.decoder skips it
_DECODER = json.JSONDecoder()
_SCAN = _DECODER.scan_once                   # the C scanner: one value at an index


class _Fallback(Exception):
    pass


def loads(raw: bytes | str):
    """json.loads(raw), slicing the long arrays of a top-level object."""
    if isinstance(raw, (bytes, bytearray)):
        s = raw.decode(json.detect_encoding(raw), "surrogatepass")   # as json.loads does
    else:
        s = raw
    try:
        return _object(s)
    except (_Fallback, StopIteration, ValueError, IndexError):
        return json.loads(raw)               # its error, or (never, by design) its value


def _ws(s: str, i: int) -> int:
    return _WS(s, i).end()


def _object(s: str) -> dict:
    if s.startswith("\ufeff"):
        raise _Fallback                      # json.loads's own error for a BOM
    i = _ws(s, 0)
    if s[i:i + 1] != "{":
        raise _Fallback                      # not an object: json.loads says what it is
    out: dict = {}
    i = _ws(s, i + 1)
    if s[i:i + 1] == "}":
        return _end(s, out, i + 1)
    while True:
        if s[i:i + 1] != '"':
            raise _Fallback
        key, i = _SCAN(s, i)
        i = _ws(s, i)
        if s[i:i + 1] != ":":
            raise _Fallback
        i = _ws(s, i + 1)
        if s[i:i + 1] == "[":
            value, i = _array(s, i)
        else:
            value, i = _SCAN(s, i)
        out[key] = value                     # a repeated key: the last value, as dict(pairs)
        i = _ws(s, i)
        c = s[i:i + 1]
        if c == "}":
            return _end(s, out, i + 1)
        if c != ",":
            raise _Fallback
        i = _ws(s, i + 1)


def _array(s: str, i: int) -> tuple[list, int]:
    out: list = []
    i = _ws(s, i + 1)
    if s[i:i + 1] == "]":
        return out, i + 1
    while True:
        value, i = _SCAN(s, i)
        out.append(value)
        if len(out) % ITEMS_AT_ONCE == 0:
            time.sleep(0)                    # the event loop's thread takes the GIL
        i = _ws(s, i)
        c = s[i:i + 1]
        if c == "]":
            return out, i + 1
        if c != ",":
            raise _Fallback
        i = _ws(s, i + 1)


_ENCODE = json.JSONEncoder(ensure_ascii=False, allow_nan=False,
                           separators=(",", ":")).encode   # JSONResponse.render's options
LONG = 64


def dumps(value) -> bytes:
    """JSONResponse(value).body: the same bytes, and the same error for what JSON cannot
    hold (NaN, infinities, other types)."""
    parts: list[str] = []
    _dump(value, parts, [0])
    return "".join(parts).encode("utf-8")


def _dump(v, parts: list, done: list) -> None:
    if isinstance(v, dict) and all(isinstance(k, str) for k in v):
        parts.append("{")
        for i, (k, x) in enumerate(v.items()):
            parts.append(("," if i else "") + _ENCODE(k) + ":")
            _dump(x, parts, done)
        parts.append("}")
    elif isinstance(v, (list, tuple)) and len(v) > LONG:
        parts.append("[")
        for i, x in enumerate(v):
            parts.append(("," if i else "") + _ENCODE(x))
            done[0] += 1
            if done[0] % ITEMS_AT_ONCE == 0:
                time.sleep(0)                # the event loop's thread takes the GIL
        parts.append("]")
    elif isinstance(v, (list, tuple)):
        parts.append("[")
        for i, x in enumerate(v):
            if i:
                parts.append(",")
            _dump(x, parts, done)
        parts.append("]")
    else:
        parts.append(_ENCODE(v))             # a scalar, or a dict json itself must key


def _end(s: str, value: dict, i: int) -> dict:
    if _ws(s, i) != len(s):
        raise _Fallback                      # "Extra data"
    return value
