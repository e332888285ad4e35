"""A reply as blocks, the way the Messages and Responses APIs present it: text blocks and
tool calls, in the order the model wrote them, each opened, filled and closed before the
next opens.

The chat machinery's parsers turn streamed text into chat deltas: a reasoning model's reply
is split first (server/text/reasoning.py, as the chat route's `ReasoningPlan` says), then
its answer goes through tools.ToolStream ({"content"} and OpenAI's tool-call deltas; a
forced plan's reply is calls alone, and one cut by max_tokens still ends as its calls).
`ReplyBlocks` turns those into block events, so /v1/messages and /v1/responses render one
sequence, streamed or whole (a whole reply is pushed at once), with whatever tools.py
decides about markup. The reasoning is not a block: these routes do not return it (their
`thinking` / `reasoning` request fields and input blocks are refused by name), so it is
split off and dropped, never shown as text. Under the harmony format (gpt-oss) the
splitter's parts carry the tool calls themselves (server/text/harmony.py). A delta of any other kind is a bug, never
dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import tools as toolmod
from .reasoning_plan import ReasoningPlan


@dataclass
class Block:
    kind: str                       # text | call
    text: str = ""                  # the text, or the call's arguments (a JSON object as text)
    call_id: str | None = None
    name: str | None = None


@dataclass
class BlockEvent:
    kind: str                       # open | delta | close
    block: Block
    delta: str = ""


@dataclass
class ReplyBlocks:
    plan: toolmod.ToolPlan
    thinking: ReasoningPlan = field(default_factory=ReasoningPlan)
    blocks: list[Block] = field(default_factory=list)
    open: Block | None = None

    def __post_init__(self):
        self.parser = self.plan.stream() \
            if self.plan.parses and not self.thinking.harmony else None
        self.split = self.thinking.stream()
        self.n_calls = 0                # harmony: its calls come as parts

    @property
    def calls(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "call"]

    def push(self, text: str) -> list[BlockEvent]:
        if not text:
            return []
        return self._answer(self.split.push(text) if self.split else [("content", text)])

    def finish(self, cut: bool = False) -> list[BlockEvent]:
        """The events that close the reply (cut: it ended at max_tokens); afterwards
        `blocks` is the whole reply."""
        out = self._answer(self.split.finish()) if self.split else []
        if self.parser:
            out += [e for d in self.parser.finish(cut=cut) for e in self._delta(d)]
        return out + self._close()

    async def stream(self, gen):
        """Yields the reply's events a piece at a time (lists, some empty) as `gen`'s pieces
        come (gen: a token_stream.Generation), the closing ones last; a failed piece's error
        is raised. When it ends, gen.finish says how the reply ended and `blocks` is whole."""
        async for p in gen.pieces():
            yield self.push(p.text)
            if p.error is not None:
                raise p.error
            if p.finish:
                yield self.finish(cut=p.finish == "length")

    def whole(self, text: str, cut: bool = False) -> list[Block]:
        self.push(text)
        self.finish(cut)
        return self.blocks

    def _answer(self, parts) -> list[BlockEvent]:
        """The answer's parts as events; the reasoning's are dropped (see above)."""
        out: list[BlockEvent] = []
        for part, text in parts:
            if part == "call":              # harmony: a whole call (a tool_calls.Call)
                out += [e for d in toolmod.call_deltas([text], self.n_calls) for e in self._delta(d)]
                self.n_calls += 1
                continue
            if part != "content":
                continue
            deltas = self.parser.push(text) if self.parser else [{"content": text}]
            out += [e for d in deltas for e in self._delta(d)]
        return out

    def _close(self) -> list[BlockEvent]:
        if self.open is None:
            return []
        b, self.open = self.open, None
        return [BlockEvent("close", b)]

    def _open(self, block: Block) -> list[BlockEvent]:
        out = self._close()
        self.open = block
        self.blocks.append(block)
        return out + [BlockEvent("open", block)]

    def _delta(self, d: dict) -> list[BlockEvent]:
        out: list[BlockEvent] = []
        if set(d) - {"content", "tool_calls"}:
            raise AssertionError(f"a reply delta of an unknown kind: {sorted(d)}")
        text = d.get("content")
        if text:
            if self.open is None or self.open.kind != "text":
                out += self._open(Block("text"))
            self.open.text += text
            out.append(BlockEvent("delta", self.open, text))
        for call in d.get("tool_calls") or ():
            fn = call.get("function") or {}
            if call.get("id") is not None:
                out += self._open(Block("call", call_id=call["id"], name=fn.get("name")))
            args = fn.get("arguments") or ""
            if args:
                self.open.text += args
                out.append(BlockEvent("delta", self.open, args))
        return out
