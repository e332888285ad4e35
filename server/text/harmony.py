"""gpt-oss's harmony replies: channels split into reasoning, content and tool calls.

The prompt ends with the template's `<|start|>assistant`; the reply is then messages

    [<|start|>assistant][ to=R]<|channel|>CHANNEL[ to=R][ <|constrain|>json]<|message|>BODY END

END one of <|end|> (more messages follow), <|return|> or <|call|> (the reply's last; as stop
tokens they may be missing from the text: the end of the reply ends the body too).
A message's part, by its channel and recipient R:

    analysis                      -> ("reasoning", BODY)
    final                         -> ("content", BODY)
    commentary, R = functions.X   -> ("call", Call(X, BODY as a JSON object's text))
    any channel, another R        -> ("call", Call(R, BODY))   (a built-in tool's call)
    commentary without R          -> ("content", BODY)         (a preamble for the user)

Nothing of the markup reaches a part. A reply that does not open with a header (a model
that never writes one) is content as written. HarmonyStream takes the reply's text in any
pieces: reasoning and content stream as they come (holding back only what may be the start
of a marker), a call comes out whole when its body ends; `parse` runs it over a whole reply,
so a streamed reply's parts join to the whole reply's. A call's body is normalised to
json.dumps of the object where it is one (tool_calls.Call's form), else kept as written
(a body cut by max_tokens).
"""
from __future__ import annotations

import json
import re

from server.text.tool_calls import Call

START, CHANNEL, MESSAGE = "<|start|>", "<|channel|>", "<|message|>"
END, RETURN, CALL, CONSTRAIN = "<|end|>", "<|return|>", "<|call|>", "<|constrain|>"
ENDS = (END, RETURN, CALL)
MARKERS = (START, CHANNEL, MESSAGE, END, RETURN, CALL, CONSTRAIN)
HEADER_LIMIT = 512          # a header longer than this without <|message|> is not one

_RECIPIENT = re.compile(r"\bto=([^\s<]+)")
_CHANNEL = re.compile(re.escape(CHANNEL) + r"\s*([A-Za-z_]+)")


def _partial_tail(text: str) -> int:
    """Length of text's longest suffix that is a proper prefix of a marker."""
    for n in range(min(max(len(m) for m in MARKERS) - 1, len(text)), 0, -1):
        if any(m.startswith(text[-n:]) and len(m) > n for m in MARKERS):
            return n
    return 0


def _call(name: str, body: str) -> Call:
    try:
        obj = json.loads(body)
    except json.JSONDecodeError:
        return Call(name, body)
    return Call(name, json.dumps(obj, ensure_ascii=False) if isinstance(obj, dict) else body)


def header_part(header: str) -> tuple[str, str | None]:
    """A header's text (between messages, up to <|message|>) -> (part, call name or None)."""
    m = _RECIPIENT.search(header)
    recipient = m.group(1) if m else None
    c = _CHANNEL.search(header)
    channel = c.group(1) if c else ""
    if recipient and recipient != "assistant" and not recipient.startswith("user"):
        return "call", recipient[len("functions."):] if recipient.startswith("functions.") \
            else recipient
    if channel == "analysis":
        return "reasoning", None
    return "content", None


class HarmonyStream:
    """Streamed reply text -> [(part, value)]: ("reasoning" | "content", text) or
    ("call", Call)."""

    def __init__(self):
        self.where = "header"       # header | body | bare
        self.held = ""
        self.part, self.name = "content", None
        self.first = True

    @property
    def in_reasoning(self) -> bool:
        """The text so far is inside an analysis message's body."""
        return self.where == "body" and self.part == "reasoning"

    @property
    def undecided(self) -> bool:
        """In a message's header: its channel (analysis or not) is not known yet."""
        return self.where == "header"

    def push(self, text: str) -> list[tuple]:
        self.held += text
        out: list = []
        while True:
            if self.where == "header":
                s = self.held.lstrip()
                if self.first and s and not any(m.startswith(s[:len(m)]) for m in (START, CHANNEL)):
                    self.where = "bare"                 # no markup: the reply is content
                    continue
                i = self.held.find(MESSAGE)
                if i < 0:
                    if len(self.held) > HEADER_LIMIT:   # not a header after all
                        self.where = "bare"
                        continue
                    return out
                self.part, self.name = header_part(self.held[:i])
                self.held, self.where, self.first = self.held[i + len(MESSAGE):], "body", False
            if self.where == "bare":
                out += self._text("content")
                return out
            # body: up to the first end marker
            j = min((k for k in (self.held.find(m) for m in ENDS) if k >= 0), default=-1)
            if j < 0:
                if self.part == "call":
                    return out                  # a call comes out whole: held until it ends
                out += self._text(self.part)
                return out
            body = self.held[:j]
            end = next(m for m in ENDS if self.held.startswith(m, j))
            self.held, self.where = self.held[j + len(end):], "header"
            if self.part == "call":
                out.append(("call", _call(self.name, body)))
            elif body:
                out.append((self.part, body))

    def _text(self, part: str) -> list[tuple]:
        """Emit what is held as `part`, but a tail that may begin a marker."""
        keep = _partial_tail(self.held)
        emit, self.held = self.held[:len(self.held) - keep], self.held[len(self.held) - keep:]
        if self.where == "bare":
            k = emit.find(START)
            if k >= 0:              # a header after bare text: the text, then messages
                emit, self.held, self.where = emit[:k], emit[k:] + self.held, "header"
                out = [(part, emit)] if emit else []
                return out + self.push("")
        return [(part, emit)] if emit else []

    def finish(self) -> list[tuple]:
        """The parts the reply's end releases: a body's held tail, a call whose end marker
        was the stop token (or a call cut by max_tokens); a cut header is dropped."""
        held, self.held = self.held, ""
        if self.where == "body":
            if self.part == "call":
                return [("call", _call(self.name, held))]
            return [(self.part, held)] if held else []
        if self.where == "bare":
            return [("content", held)] if held else []
        return []                   # a header cut short (what is held is markup)


def parse(text: str) -> tuple[str | None, str | None, list[Call]]:
    """-> (reasoning or None, content or None, calls) of a whole reply."""
    s = HarmonyStream()
    parts = s.push(text) + s.finish()
    reasoning = "".join(v for p, v in parts if p == "reasoning")
    content = "".join(v for p, v in parts if p == "content")
    return reasoning or None, content or None, [v for p, v in parts if p == "call"]
