"""The grammar of a forced tool call under GLM's format (tool_choice "required" or a named
function), as Lark for llguidance, written over GLM's own markup (server/text/glm_tools.py):

    <tool_call>NAME
    <arg_key>K</arg_key>
    <arg_value>V</arg_value>
    ...
    </tool_call>

one call, or several joined by a newline (`many`). The pairs follow the parameters schema's
`properties` in their order, each required one present and the others optional. A value:

- a `"type": "string"` parameter: free text up to the first `</arg_value>` (it cannot hold
  that marker); with an `enum`, one of its strings as written;
- any other parameter: JSON (`%json` of its schema, as llguidance takes it; a `$ref` into
  the parameters' `$defs` resolves), which the parser reads back with json.loads.

A function whose parameters name no properties takes any keys with string values (the
parser keeps a string value that does not parse as JSON). Nothing may follow the last
call: the sampler then allows only the stop tokens.

The reply may reason first (`reasoning`: None, the call from the first token; "outside",
an optional `<think>...</think>` then whitespace; "inside", the prompt opened `<think>`:
free text up to `</think>`, then whitespace). The reasoning is written here rather than by
the engine's after_reasoning, because GLM's vocabulary has its markup (`<think>`,
`<tool_call>`, `<arg_key>`, ...) as added tokens, which llguidance takes as special tokens
that a quoted string never matches: each marker is written as its token where the
vocabulary (`tok`) has it as an added token, else as text (then free text is bounded by a
lazy match up to the marker's text).
"""
from __future__ import annotations

import json

from server.text.lark_markers import lark_markers
from server.text.glm_tools import ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END, CLOSE, OPEN
from server.text.reasoning import THINK_CLOSE, THINK_OPEN

MARKERS = (OPEN, CLOSE, ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END, THINK_OPEN, THINK_CLOSE)


def _lit(s: str) -> str:
    return json.dumps(s)


def markers(tok) -> dict[str, str]:
    """Each marker as Lark: its token where the vocabulary has it as an added token (special
    or not), else its text as a string (lark_markers)."""
    return lark_markers(tok, MARKERS)


def _free_until(m: dict, marker: str, name: str) -> str:
    """Rule `name`: free text, then `marker`."""
    if m[marker] == marker:             # a token: text never spells it
        return f"{name}: /(.|\\n)*/ {marker}\n"
    return f"{name}[lazy]: /(?s:.*){json.dumps(marker)[1:-1].replace('/', chr(92) + '/')}/\n"


def _value(prop, schema_of, defs: dict, m: dict) -> str:
    """A parameter's value up to and with </arg_value>, as Lark."""
    end = m[ARG_VALUE_END]
    if isinstance(prop, dict) and prop.get("type") == "string":
        if isinstance(prop.get("enum"), list) and prop["enum"]:
            return f"({' | '.join(_lit(str(e)) for e in prop['enum'])}) {end}"
        return "sval"
    prop = {**defs, **prop} if isinstance(prop, dict) else {}
    return f"%json {json.dumps(schema_of(prop))} {end}"


def _pair(key: str, prop, schema_of, defs: dict, m: dict) -> str:
    return (f"{m[ARG_KEY]} {_lit(key)} {m[ARG_KEY_END]} \"\\n\" {m[ARG_VALUE]} "
            f"{_value(prop, schema_of, defs, m)} \"\\n\"")


_START = {
    None: "start: calls\n",
    "outside": "start: (think WS)? calls\n",
    "inside": "start: reason WS calls\n",
}


def call_grammar(tools: list, many: bool, schema_of=lambda s: s, tok=None,
                 reasoning: str | None = None) -> str:
    """Lark for one call to one of `tools` (OpenAI tool dicts), or one or more when `many`.
    schema_of(property schema) -> the schema as llguidance takes it; tok: the vocabulary
    (None: the markers as text); reasoning: None, "outside" or "inside" (see above)."""
    if reasoning not in _START:
        raise ValueError(f"reasoning is None, 'inside' or 'outside', not {reasoning!r}")
    m = markers(tok)
    rules, alts = [], []
    for n, t in enumerate(tools):
        fn = t["function"]
        params = fn.get("parameters") or {}
        props = params.get("properties") or {}
        required = set(params.get("required") or ())
        defs = {k: params[k] for k in ("$defs", "definitions") if k in params}
        if props:
            parts = []
            for k, v in props.items():
                p = _pair(k, v, schema_of, defs, m)
                parts.append(p if k in required else f"({p})?")
            body = " ".join(parts)
        elif params.get("additionalProperties", True) is not False:
            body = "anypair*"
        else:
            body = ""
        rules.append(f"f{n}: {_lit(fn['name'] + chr(10))} {body}\n")
        alts.append(f"f{n}")
    more = ' ("\\n" call)*' if many else ""
    return (_START[reasoning] +
            f"calls: call{more}\n"
            f"call: {m[OPEN]} ({' | '.join(alts)}) {m[CLOSE]}\n"
            + "".join(rules)
            + _free_until(m, ARG_VALUE_END, "sval")
            + f'anypair: {m[ARG_KEY]} /[^<\\n]+/ {m[ARG_KEY_END]} "\\n" {m[ARG_VALUE]} sval "\\n"\n'
            + f"think: {m[THINK_OPEN]} reason\n"
            + _free_until(m, THINK_CLOSE, "reason")
            + "WS: /[ \\t\\n]*/\n")
