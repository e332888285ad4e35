"""How many tokens each decoding stream drafts this round.

Drafting spends rows to save rounds, so it backs off as a round fills: a round's rows
(every decoding stream's one, and the drafts) stay within `rows_cap` (one verify window's
rows by default: a stream alone drafts its full window, 16 decoding streams draft none),
and a round that prefills drafts nothing (its rows are spent on prompts already). A stream
never drafts past the end of its reply (max_tokens, the context), so the rows it writes
are rows plain decoding would write too, within the table admission reserved.
"""
from __future__ import annotations


def round_drafts(streams, tokens: int, rows_cap: int, prefilling: bool) -> list:
    """streams: [(its StreamDrafts or None, its reply so far, tokens it may still emit)],
    in round order -> one tuple of drafts per stream (empty: a plain decode row)."""
    budget = 0 if prefilling else rows_cap - len(streams)
    out = []
    for src, reply, left in streams:
        k = min(tokens, left - 1, budget)
        d = src.propose(reply, k) if src is not None and k > 0 else ()
        budget -= len(d)
        out.append(tuple(d))
    return out
