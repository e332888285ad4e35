"""Streamed text: token ids -> text pieces (stop strings are cut out in stops.py).

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
