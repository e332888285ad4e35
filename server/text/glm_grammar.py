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
- any other parameter: JSON (`%json` of its schema, as llguidance takes it), which the
  parser reads back with json.loads.

A function whose parameters name no properties takes any keys with string values (the
parser keeps a string value that does not parse as JSON). Nothing may follow the last
call: the sampler then allows only the stop tokens. The markers are written as text; a
vocabulary that has them as (non-special) tokens matches them either way.
"""
from __future__ import annotations

import json

from server.text.glm_tools import ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END, CLOSE, OPEN

_STRING = 'sval[lazy]: /(?s:.*)<\\/arg_value>/\n'


def _lit(s: str) -> str:
    return json.dumps(s)


def _value(prop: dict, schema_of, defs: dict) -> str:
    """A parameter's value up to and with </arg_value>, as Lark (defs: the parameters
    schema's `$defs` / `definitions`, which a property's `$ref` may point into)."""
    if isinstance(prop, dict) and prop.get("type") == "string":
        if isinstance(prop.get("enum"), list) and prop["enum"]:
            alts = " | ".join(_lit(str(e) + ARG_VALUE_END) for e in prop["enum"])
            return f"({alts})"
        return "sval"
    prop = {**defs, **prop} if isinstance(prop, dict) else {}
    return f"%json {json.dumps(schema_of(prop))} " \
           f"{_lit(ARG_VALUE_END)}"


def _pair(key: str, prop, schema_of, defs: dict) -> str:
    return f"{_lit(ARG_KEY + key + ARG_KEY_END + chr(10) + ARG_VALUE)} {_value(prop, schema_of, defs)} \"\\n\""


def call_grammar(tools: list, many: bool, schema_of=lambda s: s) -> str:
    """Lark for one call to one of `tools` (OpenAI tool dicts), or one or more when `many`.
    schema_of(property schema) -> the schema as llguidance takes it."""
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
                p = _pair(k, v, schema_of, defs)
                parts.append(p if k in required else f"({p})?")
            body = " ".join(parts)
        elif params.get("additionalProperties", True) is not False:
            body = 'anypair*'
        else:
            body = ""
        rules.append(f"f{n}: {_lit(fn['name'] + chr(10))} {body}\n")
        alts.append(f"f{n}")
    more = ' ("\\n" call)*' if many else ""
    return (f"start: call{more}\n"
            f"call: {_lit(OPEN)} ({' | '.join(alts)}) {_lit(CLOSE)}\n"
            + "".join(rules) + _STRING +
            f'anypair: {_lit(ARG_KEY)} /[^<\\n]+/ {_lit(ARG_KEY_END + chr(10) + ARG_VALUE)} sval "\\n"\n')
