"""Reasoning on /v1/chat/completions: which parser a request's reply goes through, and the
request fields that steer it.

- The parser: `--reasoning-parser` (server/text/reasoning.py's PARSER_NAMES; auto picks
  `<think>` parsing from the chat template or the model's family, none keeps the reply
  raw), or per request llama-server's `reasoning_format: "none"` (raw).
- Where the reply starts: inside its reasoning when the rendered prompt ends with
  `<think>` (DeepSeek-R1's template), else outside (it may open `<think>` itself).
- `include_reasoning` (vLLM's; default true): false drops the reasoning from the reply.
- `reasoning_effort` (OpenAI's) reaches the chat template as the variable
  `reasoning_effort`, and `chat_template_kwargs` (e.g. `enable_thinking`) as theirs;
  `chat_template_kwargs` wins where both name one.
- A grammar (structured outputs, forced tool calls) applies from the end of the reasoning
  (compile_grammar's `reasoning`), as vLLM's structured outputs do; under the harmony
  format one grammar holds the channels and the call or answer (harmony_constraint.py).
- harmony (gpt-oss): the reply's channels are parsed (server/text/harmony.py): analysis
  as the reasoning, final as the content, commentary calls as tool_calls; the model's
  template writes `reasoning_effort` into its system message.
"""
from __future__ import annotations

from dataclasses import dataclass

from server.text.reasoning import ReasoningStream, opens_inside, resolve_parser

from .textflow import chat_template


@dataclass(frozen=True)
class ReasoningPlan:
    parser: str | None = None       # "think", "harmony", or None: the reply is content as written
    inside: bool = False            # the prompt opened <think>: the reply starts inside it
    include: bool = True            # the reply carries reasoning_content (and reasoning)

    @property
    def where(self) -> str | None:
        """compile_grammar's `reasoning` argument."""
        if self.parser is None:
            return None
        return "inside" if self.inside else "outside"

    @property
    def harmony(self) -> bool:
        """gpt-oss's channels: tool calls are the reply's parts (no ToolStream over content)."""
        return self.parser == "harmony"

    def stream(self):
        """A fresh splitter of the reply's text into parts ("reasoning" | "content", text),
        and for harmony ("call", tool_calls.Call); None without a parser."""
        if self.parser == "harmony":
            from server.text.harmony import HarmonyStream
            return HarmonyStream()
        return ReasoningStream(self.inside) if self.parser else None


def server_parser(state) -> str | None:
    """The served model's parser: --reasoning-parser, auto resolved over the template."""
    return resolve_parser(getattr(state, "reasoning_parser", "auto"), chat_template(state),
                          getattr(state, "model_name", ""))


def reasoning_plan(state, body, prompt_text: str) -> ReasoningPlan:
    parser = server_parser(state)
    if parser is None or getattr(body, "reasoning_format", None) == "none":
        return ReasoningPlan()
    return ReasoningPlan(parser, opens_inside(prompt_text), body.include_reasoning is not False)


def template_kwargs(body) -> dict:
    """The template variables a chat request sets: reasoning_effort, then chat_template_kwargs."""
    out = {}
    if getattr(body, "reasoning_effort", None) is not None:
        out["reasoning_effort"] = body.reasoning_effort
    return {**out, **(body.chat_template_kwargs or {})}
