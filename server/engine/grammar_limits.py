"""The size and depth a grammar may have, checked in Python before the grammar engine
(llguidance) sees it: `problem(kind, spec)` names the first limit a grammar passes, or None.

Why: llguidance's compilation recurses once a rule (a Lark / GBNF chain `r_i: "a" r_{i+1}`)
or once a `$ref` (a JSON schema's `d_i = anyOf[$ref d_{i+1}, null]`), so a long enough
chain overflows any stack, and some grammars take seconds (llguidance's GBNF converter is
quadratic in a chain's length, 100,000 choices take 12 s and then panic). Compilation runs
on a thread with a stack far larger than these limits need (grammar_compiler.py); the
limits keep its time short and its depth measured (docs/receipts/2026-12-05-hardening-2/
grammar.md: on an 8 MiB stack a Lark chain crashed at ~2,700 rules, a `$defs` chain at
~1,030). Every check here is iterative: no input can make it recurse.
"""
from __future__ import annotations

import json
import re

GRAMMAR_BYTES = 64 * 1024     # the text of a Lark or GBNF grammar (its %json schemas apart), or a regex
GRAMMAR_RULES = 1000          # rule and terminal definitions in a Lark or GBNF grammar
SCHEMA_BYTES = 256 * 1024     # a JSON schema (a grammar's %json schemas together), as compact JSON
SCHEMA_DEFS = 1000            # entries of every $defs / definitions in a schema together
SCHEMA_DEPTH = 64             # objects and arrays inside one another in a schema
CHOICES = 10_000              # options of a choice
CHOICE_BYTES = 256 * 1024     # their total length (UTF-8)
REPEAT_PRODUCT = 10_000       # counted repetitions nested in a regex or grammar, multiplied: (x{100}){100}

# a rule's or terminal's definition: `name:`, `?name:`, `NAME.2:` (Lark), `name ::=` (GBNF)
_RULE = re.compile(r"(?m)^[ \t]*[?!]?[A-Za-z0-9_-]+(\.-?\d+)?[ \t]*(::=|:)")
_COUNT = re.compile(r"\{\s*(\d+)\s*(?:,\s*(\d*)\s*)?\}")
_TILDE = re.compile(r"~\s*(\d+)(?:\s*\.\.\s*(\d+))?")     # Lark's x~n, x~n..m


def repeat_product(text: str, syntax: str = "regex") -> int:
    """The largest product of counted repetitions nested in `text`: about how many copies of
    its innermost part the engine unrolls ((x{100}){100}: 10,000). A count is {n}, {n,m} or
    {n,} (m, else n), in Lark also x~n and x~n..m. syntax "regex": escapes and [classes] are
    skipped. "gbnf": the same, with "strings" and # comments skipped. "lark": "strings" and
    // comments skipped, [optional] parts are groups, each /regex/ is an atom of its own
    product. Siblings do not multiply; a group left open counts as closed at the end (the
    engine refuses such a text anyway)."""
    inner = [1]                  # per open group: the largest product inside it so far
    last = 1                     # the product of the atom or group a count would repeat
    lark, i, n = syntax == "lark", 0, len(text)
    opens, closes = ("([", ")]") if lark else ("(", ")")
    while i < n:
        c = text[i]
        if c in opens:
            inner.append(1)
            i += 1
            continue
        if c in closes:
            last = inner.pop() if len(inner) > 1 else 1
            inner[-1] = max(inner[-1], last)
            i += 1
            continue
        if c == "{" or (c == "~" and lark):
            m = (_COUNT if c == "{" else _TILDE).match(text, i)
            if m:
                hi = m.group(2)
                last *= max(int(hi) if hi else int(m.group(1)), 1)
                inner[-1] = max(inner[-1], last)
                i = m.end()
                continue
        if syntax != "regex" and c == '"':
            m = _QUOTED.match(text, i)
            i = m.end() if m else i + 1
        elif (lark and text.startswith("//", i)) or (syntax == "gbnf" and c == "#"):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif lark and c == "/":  # a regex literal: its own product is this atom's
            j = i + 1
            while j < n and text[j] not in "/\n":
                j += 2 if text[j] == "\\" else 1
            last = repeat_product(text[i + 1:j], "regex")
            inner[-1] = max(inner[-1], last)
            i = j + 1
            continue
        elif c == "\\":
            i += 2
        elif c == "[":           # a class, to its closing bracket (one right after [ or [^ is literal)
            j = i + 1 + (text[i + 1:i + 2] == "^")
            j += text[j:j + 1] == "]"
            while j < n and text[j] != "]":
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
        last = 1
    return max(inner)


_QUOTED = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_LARK = re.compile(r"(?m)^\s*(%llguidance\b|start\s*:)")  # GBNF text that llguidance takes as Lark


def _schema_problem(schema, what: str = "") -> str | None:
    """The first limit a schema passes (`what` starts the sentence), or None."""
    defs, worst = 0, 1
    todo = [(schema, 1)]
    while todo:                  # every object and array, with its depth
        node, depth = todo.pop()
        if depth > SCHEMA_DEPTH:
            return f"{what}objects and arrays nested more than {SCHEMA_DEPTH} deep; " \
                   f"at most {SCHEMA_DEPTH}"
        if isinstance(node, dict):
            for key in ("$defs", "definitions"):
                if isinstance(node.get(key), dict):
                    defs += len(node[key])
            pattern = node.get("pattern")
            if isinstance(pattern, str):
                worst = max(worst, repeat_product(pattern))
            todo.extend((v, depth + 1) for v in node.values() if isinstance(v, (dict, list)))
        elif isinstance(node, list):
            todo.extend((v, depth + 1) for v in node if isinstance(v, (dict, list)))
    try:                         # (its depth is bounded now)
        size = len(json.dumps(schema, separators=(",", ":")).encode())
    except (TypeError, ValueError):
        return None              # not JSON: the engine says so
    if size > SCHEMA_BYTES:
        return f"{what}{size} bytes as JSON; at most {SCHEMA_BYTES}"
    if defs > SCHEMA_DEFS:
        return f"{what}{defs} $defs / definitions; at most {SCHEMA_DEFS}"
    if worst > REPEAT_PRODUCT:
        return f"{what}a pattern's nested repetitions multiply to {worst}; at most {REPEAT_PRODUCT}"
    return None


_JSON_AT = re.compile(r"%json\s*")


def _split_json(lark: str) -> tuple[str, list]:
    """-> (the Lark text without its `%json {...}` schemas, those schemas)."""
    rest, schemas, at = [], [], 0
    decoder = json.JSONDecoder()
    for m in _JSON_AT.finditer(lark):
        if m.start() < at:
            continue
        try:
            schema, end = decoder.raw_decode(lark, m.end())
        except (ValueError, RecursionError):
            continue             # left in the text: the engine says what is wrong
        rest.append(lark[at:m.start()])
        schemas.append(schema)
        at = end
    rest.append(lark[at:])
    return "".join(rest), schemas


def problem(kind: str, spec) -> str | None:
    """The first limit `spec` (a grammar of `kind`, as grammar.grammar_text takes it)
    passes, said with the limit's number, or None."""
    if kind == "json_schema":
        if isinstance(spec, str):
            if len(spec.encode()) > SCHEMA_BYTES:
                return f"{len(spec.encode())} bytes; at most {SCHEMA_BYTES}"
            try:
                spec = json.loads(spec)
            except (ValueError, RecursionError):
                return None      # grammar_text says what is wrong
        return _schema_problem(spec)
    if kind == "choice":
        if not isinstance(spec, (list, tuple)):
            return None          # grammar_text says what a choice is
        if len(spec) > CHOICES:
            return f"{len(spec)} options; at most {CHOICES}"
        size = sum(len(s.encode()) for s in spec if isinstance(s, str))
        if size > CHOICE_BYTES:
            return f"the options have {size} bytes together; at most {CHOICE_BYTES}"
        return None
    if kind in ("regex", "lark", "gbnf") and isinstance(spec, str):
        if kind != "regex":      # JSON schemas inside (%json {...}: tool calls) count as schemas
            spec, schemas = _split_json(spec)
            if schemas:
                why = _schema_problem(schemas, "its %json schemas: ")
                if why:
                    return why
        size = len(spec.encode())
        if size > GRAMMAR_BYTES:
            return f"{size} bytes; at most {GRAMMAR_BYTES}"
        if kind != "regex":
            rules = len(_RULE.findall(spec))
            if rules > GRAMMAR_RULES:
                return f"{rules} rules; at most {GRAMMAR_RULES}"
        product = repeat_product(spec, "lark" if kind == "lark" or _LARK.search(spec) else kind)
        if product > REPEAT_PRODUCT:
            return f"nested repetitions multiply to {product}; at most {REPEAT_PRODUCT}"
    return None
