"""A reply's reasoning, split from its answer: the `<think>...</think>` style that Qwen3,
QwQ, DeepSeek-R1 (and its distills) and the GLM-4.5 family write.

    reasoning, content = split("<think>\\nwhy...\\n</think>\\n\\nThe answer.", inside=False)
    # -> ("why...\\n", "The answer.")

A reply is inside its reasoning from its first token when the prompt itself ends with
`<think>` (DeepSeek-R1's template writes it after the assistant's header): then everything
up to `</think>` is reasoning, and a reply cut before it is reasoning alone. Otherwise a
reply is reasoning only when it opens with `<think>` (leading whitespace allowed); else it
is all content. Each part's leading whitespace is dropped (`</think>\\n\\n` is the
template's layout, not the answer); an empty part is None.

ReasoningStream is the same split for streamed text: pieces in, ("reasoning" | "content",
text) out, holding back only what could still be a marker; `split` runs it over the
whole text, so a streamed reply's deltas join to the whole reply's parts.
"""
from __future__ import annotations

import re

THINK_OPEN, THINK_CLOSE = "<think>", "</think>"

# --reasoning-parser's choices: auto (from the template or the model's family), none
# (the reply stays raw text), think, and vLLM's names for this same parser; harmony
# (gpt-oss's channels, server/text/harmony.py: reasoning, content and tool calls) and
# vLLM's name for it
PARSER_NAMES = ("auto", "none", "think", "qwen3", "deepseek_r1", "glm45", "harmony",
                "openai_gptoss")
_THINK_ALIASES = {"think", "qwen3", "deepseek_r1", "glm45"}
_HARMONY_ALIASES = {"harmony", "openai_gptoss"}
# families that think when their template does not say so (a replaced template, say)
_THINKING_FAMILIES = re.compile(r"qwen-?3|qwq|deepseek-?r1|glm-?4\.[5-9]|glm-?5|glm-?z1", re.I)
_HARMONY_FAMILIES = re.compile(r"gpt-?oss", re.I)
HARMONY_CHANNEL = "<|channel|>"


def resolve_parser(name: str, template: str | None, model_name: str = "") -> str | None:
    """--reasoning-parser -> "think", "harmony" or None. auto: "harmony" when the chat
    template writes `<|channel|>` (gpt-oss's own) or, without a template that says
    otherwise, the model's name is gpt-oss's; "think" when the template writes or reads
    `<think>` / `</think>`, or the model's name is of a thinking family."""
    if name == "none":
        return None
    if name in _THINK_ALIASES:
        return "think"
    if name in _HARMONY_ALIASES:
        return "harmony"
    if name != "auto":
        raise ValueError(f"unknown reasoning parser {name!r}; one of {', '.join(PARSER_NAMES)}")
    if isinstance(template, str) and HARMONY_CHANNEL in template:
        return "harmony"
    if isinstance(template, str) and (THINK_OPEN in template or THINK_CLOSE in template):
        return "think"
    if _HARMONY_FAMILIES.search(model_name or ""):
        return "harmony"
    return "think" if _THINKING_FAMILIES.search(model_name or "") else None


def opens_inside(prompt_text: str) -> bool:
    """The rendered prompt ends with `<think>`: the reply starts inside its reasoning."""
    return prompt_text.rstrip().endswith(THINK_OPEN)


def _partial_tail(text: str, marker: str) -> int:
    """Length of text's longest suffix that is a proper prefix of marker."""
    for n in range(min(len(marker) - 1, len(text)), 0, -1):
        if text.endswith(marker[:n]):
            return n
    return 0


class ReasoningStream:
    """Streamed reply text -> [(part, text)], part "reasoning" or "content"."""

    def __init__(self, inside: bool):
        self.where = "reasoning" if inside else "start"     # start | reasoning | content
        self.held = ""
        self.lead = True            # the current part has shown nothing yet

    def _out(self, part: str, text: str, out: list) -> None:
        if self.lead:
            text = text.lstrip()
        if text:
            self.lead = False
            out.append((part, text))

    @property
    def in_reasoning(self) -> bool:
        """The text so far has opened the reasoning and not closed it."""
        return self.where == "reasoning"

    @property
    def undecided(self) -> bool:
        """Whether the reply opens with reasoning is not known yet (it may open <think>)."""
        return self.where == "start"

    def push(self, text: str) -> list[tuple[str, str]]:
        self.held += text
        out: list = []
        if self.where == "start":
            s = self.held.lstrip()
            if not s or (THINK_OPEN.startswith(s) and s != THINK_OPEN):
                return out                              # may still open <think>
            if s.startswith(THINK_OPEN):
                self.where, self.held = "reasoning", s[len(THINK_OPEN):]
            else:
                self.where, self.lead = "content", False    # no reasoning: the text as is
        if self.where == "reasoning":
            j = self.held.find(THINK_CLOSE)
            if j < 0:
                keep = _partial_tail(self.held, THINK_CLOSE)
                emit, self.held = self.held[:len(self.held) - keep], self.held[len(self.held) - keep:]
                self._out("reasoning", emit, out)
                return out
            self._out("reasoning", self.held[:j], out)
            self.where, self.held, self.lead = "content", self.held[j + len(THINK_CLOSE):], True
        held, self.held = self.held, ""
        self._out("content", held, out)
        return out

    def finish(self) -> list[tuple[str, str]]:
        held, self.held = self.held, ""
        out: list = []
        if self.where == "start":
            self.lead = False
            self._out("content", held, out)             # whitespace, or a cut "<thi"
        else:
            self._out(self.where, held, out)
        return out


def split(text: str, inside: bool) -> tuple[str | None, str | None]:
    """-> (reasoning or None, content or None) of a whole reply."""
    s = ReasoningStream(inside)
    parts = s.push(text) + s.finish()
    reasoning = "".join(t for p, t in parts if p == "reasoning")
    content = "".join(t for p, t in parts if p == "content")
    return reasoning or None, content or None
