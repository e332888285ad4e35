"""The draft-source interface, and `--draft`'s names.

A `DraftSource` is one per server; `stream(prompt_ids)` gives a stream its own
`StreamDrafts`, which proposes up to k tokens to follow the reply so far. A proposal is
only a guess: the scheduler verifies every proposed token against the token the plain
sampler draws from that position's row (server/verify.py), so what a source proposes can
change the speed, never a reply. Sources: `ngram` (prompt lookup, server/drafts/ngram.py:
no weights, every family) and `mtp` (server/drafts/mtp.py: the checkpoint's NextN layer,
server/families/nextn.py; glm4moe and deepseek2 files that carry one, `--draft mtp` refused by
name on any other model, flags.drafts_for). A source with `engine_pass` runs on the ranks
after each round (`after_round`, an MtpStep) and keeps its guesses for the next.
"""
from __future__ import annotations

from typing import Protocol

KINDS = ("ngram", "mtp", "off")


class StreamDrafts(Protocol):
    def propose(self, out: list, k: int) -> tuple:
        """Up to k tokens to follow prompt + out (out: the reply so far, appended to only)."""

    def verified(self, proposed: int, accepted: int) -> None:
        """How the last proposal fared (a source may adapt how far it drafts)."""


class DraftSource(Protocol):
    name: str

    def stream(self, prompt_ids) -> StreamDrafts:
        """A new stream's drafts."""


class DraftUnavailable(ValueError):
    """A --draft kind this server cannot serve (said at startup, before any weight)."""


def make_source(kind: str) -> DraftSource | None:
    """--draft's value -> the source (None: off)."""
    if kind == "off":
        return None
    if kind == "ngram":
        from server.drafts.ngram import NgramSource
        return NgramSource()
    if kind == "mtp":
        from server.drafts.mtp import MtpSource
        return MtpSource()
    raise DraftUnavailable(f"--draft {kind!r}: one of {', '.join(KINDS)}")


def verify_window(kind: str, tokens: int) -> int:
    """Rows a verify pass writes: the stream's last token and its drafts (1 without)."""
    return 1 if kind == "off" else tokens + 1
