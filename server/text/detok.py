"""Streamed text: token ids -> text pieces, and stop strings cut out of that stream.

IncrementalDetokenizer decodes a small window instead of single tokens, because one
token may carry half of a UTF-8 character (byte-level BPE splits emoji and CJK across
tokens) and some decoders treat a token differently at the start of a text. The window:

    ids:  ... | prefix_offset ........ read_offset ........ len(ids)
                \\_ already emitted _/ \\_ not yet emitted _/

decode(ids[prefix:]) minus decode(ids[prefix:read]) is the new text; it is held back
while it ends in U+FFFD, i.e. while the last character is still incomplete.
"""
from __future__ import annotations

REPLACEMENT = "\ufffd"


class IncrementalDetokenizer:
    def __init__(self, tokenizer, skip_special_tokens: bool = False, context=()):
        """context: ids that come before the reply (the prompt's last token). A reply's first
        token is then decoded after it, as it stands in the text: SentencePiece decoding
        strips the leading space of a text, so alone "▁Paris" would stream as "Paris"."""
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = list(context)
        if self._ids and self._decode(self._ids).endswith(REPLACEMENT):
            self._ids = []                # a half character in the context: start clean
        self._prefix = 0  # start of the decode window (already emitted text)
        self._read = len(self._ids)  # first id whose text has not been emitted

    def _decode(self, ids) -> str:
        return self._tok.decode(ids, skip_special_tokens=self._skip)

    def push(self, token_id: int) -> str:
        """New complete text after `token_id` ('' while a character is unfinished)."""
        self._ids.append(token_id)
        done = self._decode(self._ids[self._prefix:self._read])
        full = self._decode(self._ids[self._prefix:])
        if len(full) <= len(done) or full.endswith(REPLACEMENT):
            return ""
        self._prefix, self._read = self._read, len(self._ids)
        return full[len(done):]

    def flush(self) -> str:
        """Whatever is held back, as is (a truly broken byte sequence comes out as U+FFFD)."""
        done = self._decode(self._ids[self._prefix:self._read])
        full = self._decode(self._ids[self._prefix:])
        self._prefix = self._read = len(self._ids)
        return full[len(done):]


class StopMatcher:
    """Cuts streamed text at the first stop string; the stop string itself is not emitted
    (unless include_stop: then the text ends with it).

    A tail that could still grow into a stop string is held back until the next push
    decides it: with stop "</s>", "ab</" emits "ab" and holds "</". push(text,
    armed=False) (before min_tokens) matches nothing and holds nothing back.
    """

    def __init__(self, stops: list[str], include_stop: bool = False):
        self._stops = [s for s in stops if s]  # an empty stop would match everywhere
        self._include = include_stop
        self._held = ""
        self.stopped = False
        self.matched: str | None = None       # the stop string that ended the text

    def push(self, text: str, armed: bool = True) -> tuple[str, bool]:
        if self.stopped:
            return "", True
        buf = self._held + text
        if not armed:
            self._held = ""
            return buf, False
        # Generation stops the moment a stop string completes, so the stop that ends first
        # wins (then the longest of those), however the text was chunked: with stops
        # ">" and "<><", the text "<><" stops at "<>" and emits "<".
        hits = [(i + len(s), i) for s, i in ((s, buf.find(s)) for s in self._stops) if i >= 0]
        if hits:
            self._held, self.stopped = "", True
            end, start = min(hits)
            self.matched = buf[start:end]
            return buf[:end if self._include else start], True
        keep = self._partial_tail(buf)
        self._held = buf[len(buf) - keep:]
        return buf[:len(buf) - keep], False

    def flush(self) -> str:
        """At the end of generation: the held tail was not a stop after all."""
        out, self._held = ("" if self.stopped else self._held), ""
        return out

    def _partial_tail(self, buf: str) -> int:
        # longest suffix of buf that is a proper prefix of some stop string
        best = 0
        for s in self._stops:
            for n in range(min(len(s) - 1, len(buf)), best, -1):
                if buf.endswith(s[:n]):
                    best = n
                    break
        return best
