"""A reply as blocks, the way the Messages and Responses APIs present it: text blocks and
tool calls, in the order the model wrote them, each opened, filled and closed before the
next opens.

The chat machinery's parser (tools.ToolStream) turns streamed text into chat deltas
({"content"} and OpenAI's tool-call deltas); `ReplyBlocks` turns those into block events,
so /v1/messages and /v1/responses render one sequence, streamed or whole (a whole reply is
pushed at once), with whatever tools.py decides about markup. Hook for a reasoning parser:
its deltas ({"reasoning_content": ...}) would become a third kind of block here, rendered
as a thinking block (Messages) or a reasoning item (Responses); until then a delta of any
other kind is a bug, never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from . import tools as toolmod


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
    blocks: list[Block] = field(default_factory=list)
    open: Block | None = None

    def __post_init__(self):
        self.parser = toolmod.ToolStream() if self.plan.parses else None

    @property
    def calls(self) -> list[Block]:
        return [b for b in self.blocks if b.kind == "call"]

    def push(self, text: str) -> list[BlockEvent]:
        if not text:
            return []
        deltas = self.parser.push(text) if self.parser else [{"content": text}]
        return [e for d in deltas for e in self._delta(d)]

    def finish(self) -> list[BlockEvent]:
        """The events that close the reply; afterwards `blocks` is the whole reply."""
        out = [e for d in (self.parser.finish() if self.parser else []) for e in self._delta(d)]
        return out + self._close()

    def whole(self, text: str) -> list[Block]:
        self.push(text)
        self.finish()
        return self.blocks

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
