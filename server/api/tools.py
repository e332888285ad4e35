"""Tools on /v1/chat/completions: tools, tool_choice, parallel_tool_calls.

- tool_choice "none" (the default without tools): tools stay out of the prompt, the
  reply is text.
- "auto" (the default with tools): tools reach the chat template as HF's
  apply_chat_template passes them (`tools=[{"type": "function", "function": {...}}]`);
  a template that never mentions `tools` gets FALLBACK_PROMPT (Hermes style, as Qwen2.5's
  template writes it) in its system message instead. The reply is parsed into tool calls
  (server/text/tool_calls.py: Hermes/Qwen <tool_call>, Mistral [TOOL_CALLS], Llama JSON;
  or, for a GLM template (one that writes `<arg_key>`), GLM's own
  `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>`:
  server/text/glm_tools.py; `tool_format`).
- "required" and a named function constrain the reply with a grammar from its first
  token (server/engine/grammar.py; after its reasoning, for a reasoning model):
  `<tool_call>\n{"name": ..., "arguments": <the function's parameters schema>}\n
  </tool_call>`, one call, or several when parallel_tool_calls and "required"; the
  arguments always validate. Under GLM's format the grammar is GLM's markup
  (server/text/glm_grammar.py), each value constrained by its parameter's schema. Such a reply is calls and nothing else: one cut by
  max_tokens comes back as its calls, the last with its arguments as far as written
  (finish_reason "length"), never as content.

Assistant turns with tool_calls and tool messages render back through the template; for
a template that does not mention `tool_calls`, the calls are written into the assistant's
content in the Hermes format and tool results as <tool_response> text.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from server.engine.grammar import engine_schema
from server.text import glm_grammar, glm_tools
from server.text import tool_calls as tc

from .errors import invalid
from .structured import compile_for

FALLBACK_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n"
    "{tools}\n</tools>\n\nFor each function call, return a json object with function name "
    "and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{{"name": <function-name>, "arguments": <args-json-object>}}\n</tool_call>'
)


@dataclass
class ToolPlan:
    mode: str                        # none | auto | required | named
    tools: list = field(default_factory=list)   # [{"type": "function", "function": {...}}]
    parallel: bool = True
    grammar: object = None
    chosen: list = field(default_factory=list)  # the functions a forced reply may call
    many: bool = False                          # a forced reply may hold several calls
    fmt: str = "hermes"                         # the reply's call format: hermes | glm

    @property
    def parses(self) -> bool:
        return self.mode != "none" and bool(self.tools)

    @property
    def forced(self) -> bool:
        return self.mode in ("required", "named")

    @property
    def names(self) -> list[str]:
        return [t["function"]["name"] for t in (self.chosen if self.forced else self.tools)]

    def stream(self) -> "ToolStream":
        """A fresh ToolStream for this plan's reply."""
        return ToolStream(self.names, self.forced, self.fmt, self.tools)


def tool_format(state) -> str:
    """The served model's tool-call format: "glm" for a GLM chat template (one that writes
    `<arg_key>`) or `--tool-call-parser glm45` (state.tool_call_parser, where the server
    sets it), else "hermes" (tool_calls.py's formats)."""
    from .textflow import chat_template
    t = chat_template(state) if state.render_chat is None else None
    return glm_tools.resolve(getattr(state, "tool_call_parser", None) or "auto", t)


def plan(state, body) -> ToolPlan:
    """The body's tool plan, checked; a forced plan's grammar is compiled by `compile_plan`
    once the prompt is rendered (a reasoning model's grammar starts after its reasoning)."""
    tools = [t.model_dump(exclude_none=True) for t in (body.tools or [])]
    choice = body.tool_choice
    mode = ("auto" if tools else "none") if choice is None else \
        (choice if isinstance(choice, str) else "named")
    parallel = body.parallel_tool_calls is not False
    if mode != "none" and not tools:
        raise invalid(f"tool_choice {mode!r} needs tools", param="tool_choice")
    names = [t["function"]["name"] for t in tools]
    if len(set(names)) != len(names):
        raise invalid("two tools have the same function name", param="tools")
    p = ToolPlan(mode, tools if mode != "none" else [], parallel, fmt=tool_format(state))
    if mode in ("required", "named"):
        if mode == "named":
            name = choice.function.name
            if name not in names:
                raise invalid(f"tool_choice names the function {name!r}, which is not in "
                              "tools", param="tool_choice.function.name")
            p.chosen, p.many = [t for t in tools if t["function"]["name"] == name], False
        else:
            p.chosen, p.many = tools, parallel
    return p


def compile_plan(state, p: ToolPlan, reasoning: str | None = None) -> ToolPlan:
    """A forced plan's call grammar, compiled (reasoning: as compile_grammar takes it)."""
    if p.forced and p.fmt == "glm":     # the reasoning written in, over GLM's tokens
        p.grammar = compile_for(state, "lark", plan_grammar(p, state.tokenizer, reasoning),
                                "tools")
    elif p.forced:
        p.grammar = compile_for(state, "lark", plan_grammar(p), "tools", reasoning=reasoning)
    return p


def plan_grammar(p: ToolPlan, tok=None, reasoning: str | None = None) -> str:
    """A forced plan's call grammar (Lark), in its format (GLM's: over `tok`'s markers,
    its reasoning written in; glm_grammar.py)."""
    if p.fmt == "glm":
        return glm_grammar.call_grammar(p.chosen, p.many, engine_schema, tok, reasoning)
    return call_grammar(p.chosen, p.many)


def tool_parameters(fn: dict) -> dict:
    """A function's parameters schema (an object without properties when it has none)."""
    return fn.get("parameters") or {"type": "object", "properties": {}}


def call_grammar(tools: list, many: bool) -> str:
    """Lark for `<tool_call>\\n{"name", "arguments"}\\n</tool_call>` (one, or one or more)."""
    alts = [{"type": "object", "properties": {"name": {"const": t["function"]["name"]},
                                              "arguments": tool_parameters(t["function"])},
             "required": ["name", "arguments"], "additionalProperties": False} for t in tools]
    schema = alts[0] if len(alts) == 1 else {"anyOf": alts}
    schema = engine_schema(schema)                  # numbers bounded, json.dumps spacing
    call = '"<tool_call>\\n" %json ' + json.dumps(schema) + ' "\\n</tool_call>"'
    more = ' ("\\n" call)*' if many else ""
    return f"start: call{more}\ncall: {call}\n"


def template_supports(state, word: str) -> bool:
    from .textflow import chat_template
    t = chat_template(state)
    return state.render_chat is None and isinstance(t, str) and word in t


def prepare_messages(state, messages: list[dict], p: ToolPlan) -> tuple[list[dict], dict]:
    """-> (messages, extra template variables): tools into the template, or the fallback."""
    extra = {}
    if not template_supports(state, "tool_calls"):
        messages = [_flatten(m) for m in messages]
    if p.tools:
        if template_supports(state, "tools"):
            extra["tools"] = p.tools
        else:
            text = FALLBACK_PROMPT.format(tools="\n".join(json.dumps(t, ensure_ascii=False)
                                                          for t in p.tools))
            if messages and messages[0]["role"] in ("system", "developer"):
                messages = [{**messages[0], "content": messages[0]["content"] + "\n\n" + text},
                            *messages[1:]]
            else:
                messages = [{"role": "system", "content": text}, *messages]
    return messages, extra


def _flatten(m: dict) -> dict:
    """Tool calls and results as text, for a template that knows neither."""
    if m["role"] == "assistant" and m.get("tool_calls"):
        calls = "\n".join(tc.HERMES_OPEN + "\n" + json.dumps(
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]},
            ensure_ascii=False) + "\n" + tc.HERMES_CLOSE for c in m["tool_calls"])
        content = (m.get("content") or "") + ("\n" if m.get("content") else "") + calls
        return {k: v for k, v in m.items() if k != "tool_calls"} | {"content": content}
    if m["role"] == "tool":
        return {"role": "user", "content": f"<tool_response>\n{m.get('content') or ''}\n"
                "</tool_response>"}
    return m


def call_id() -> str:
    return "call_" + uuid.uuid4().hex[:24]


def call_dict(c: tc.Call) -> dict:
    return {"id": call_id(), "type": "function",
            "function": {"name": c.name, "arguments": c.arguments}}


def message(text: str | None, finish: str | None, p: ToolPlan) -> tuple[dict, str | None]:
    """The assistant message for a whole reply (text: its answer, None when it has none),
    and its finish_reason."""
    if not p.parses or text is None:
        return {"role": "assistant", "content": text}, finish
    cut = finish == "length"
    if p.forced:
        calls = glm_tools.forced_calls(text, p.tools, p.names, cut) if p.fmt == "glm" \
            else tc.forced_calls(text, p.names, cut)
        msg = {"role": "assistant", "content": None}
        if calls:
            msg["tool_calls"] = [call_dict(c) for c in calls]
        return msg, "tool_calls" if finish == "stop" else finish
    content, calls = glm_tools.parse(text, p.tools, cut) if p.fmt == "glm" \
        else tc.parse(text, p.names, cut)
    if not calls:
        return {"role": "assistant", "content": text if not cut else content}, finish
    msg = {"role": "assistant", "content": content, "tool_calls": [call_dict(c) for c in calls]}
    return msg, "tool_calls" if finish == "stop" else finish


class ToolStream:
    """Streamed text -> deltas: content streams until a tool-call marker, calls come out
    whole as OpenAI's tool-call deltas (id, type and name first, then the arguments).
    A forced plan's reply (`forced`; `names`: the functions it may call) is calls alone:
    nothing of it streams as content. `finish(cut=True)`: the reply ended at max_tokens,
    and its cut last call comes out as a call (tool_calls.cut_call), as the whole reply's
    would. fmt "glm": GLM's calls (glm_tools.py; `tools`: the request's tool dicts, for
    the parameters' types): content streams until `<tool_call>`, each call comes out whole
    at its `</tool_call>`."""

    def __init__(self, names=(), forced: bool = False, fmt: str = "hermes", tools=()):
        self.held = ""
        self.names, self.forced = list(names), forced
        self.glm, self.tools = fmt == "glm", list(tools or ())
        self.mode = "calls" if forced else ("content" if self.glm else "start")
        self.count = 0                          # start | content | calls | whole

    def _parse(self, text: str, cut: bool = False):
        if self.glm:
            return glm_tools.parse(text, self.tools, cut)
        return tc.parse(text, self.names, cut)

    def push(self, text: str) -> list[dict]:
        self.held += text
        out = []
        while True:
            if self.mode == "start":
                if tc.may_start_call(self.held) and not tc.marker_at(self.held) >= 0:
                    s = self.held.lstrip()
                    if s.startswith("{") or s.startswith(tc.PYTHON_TAG):
                        self.mode = "whole"     # Llama JSON: the whole reply decides
                    return out
                self.mode = "content"
            if self.mode == "whole":
                return out
            if self.mode == "content" and self.glm and self.count:
                s = self.held.lstrip()          # the layout between GLM's calls: held,
                if not s:                       # dropped when another call follows
                    return out
                if s.startswith(tc.HERMES_OPEN) or tc.HERMES_OPEN.startswith(s):
                    self.held = s
            if self.mode == "content":
                i = self.held.find(tc.HERMES_OPEN) if self.glm else tc.marker_at(self.held)
                if i < 0:
                    keep = tc.partial_tail(self.held, tc.HERMES_OPEN) if self.glm \
                        else tc.partial_marker_tail(self.held)
                    emit, self.held = self.held[:len(self.held) - keep], self.held[len(self.held) - keep:]
                    if emit:
                        out.append({"content": emit})
                    return out
                if self.held[:i]:
                    out.append({"content": self.held[:i]})
                self.held, self.mode = self.held[i:], "calls"
            if self.mode == "calls":
                if self.held.startswith(tc.MISTRAL) and not self.glm:
                    return out                  # Mistral: a list, decided at the end
                j = self.held.find(tc.HERMES_CLOSE)
                if j < 0:
                    return out
                seg = self.held[:j + len(tc.HERMES_CLOSE)]
                content, calls = self._parse(seg)
                if self.forced:
                    out += self._calls(calls)
                    self.held = self.held[len(seg):].lstrip()
                    continue
                out += self._calls(calls) if calls else [{"content": seg}]
                rest = self.held[len(seg):]
                self.held = rest.lstrip("\n") if calls else rest
                self.mode = "content"

    def finish(self, cut: bool = False) -> list[dict]:
        held, self.held = self.held, ""
        if self.forced:
            calls = glm_tools.forced_calls(held, self.tools, self.names, cut) if self.glm \
                else tc.forced_calls(held, self.names, cut)
            return self._calls(calls) if held or (cut and not self.count) else []
        if not held or (self.glm and self.count and not held.strip()):
            return []
        content, calls = self._parse(held, cut)
        if cut and not calls:
            return [{"content": content}] if content else []
        out = [{"content": content}] if content and calls else []
        return out + (self._calls(calls) if calls else [{"content": held}])

    def _calls(self, calls) -> list[dict]:
        out = call_deltas(calls, self.count)
        self.count += len(calls)
        return out


def call_deltas(calls, first: int = 0) -> list[dict]:
    """Whole calls -> OpenAI's tool-call deltas, numbered from `first`: id, type and name,
    then the arguments."""
    out = []
    for n, c in enumerate(calls, first):
        d = call_dict(c)
        out.append({"tool_calls": [{"index": n, "id": d["id"], "type": "function",
                                    "function": {"name": c.name, "arguments": ""}}]})
        out.append({"tool_calls": [{"index": n, "function": {"arguments": c.arguments}}]})
    return out
