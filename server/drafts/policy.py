"""How many tokens each decoding stream drafts this round.

Drafting spends rows to save rounds, so it backs off as a round fills: a round's rows
(every decoding stream's one, and the drafts) stay within `rows_cap` (one verify window's
rows by default: a stream alone drafts its full window, 16 decoding streams draft none),
and a round that prefills drafts nothing (its rows are spent on prompts already). Within
that, each stream drafts what pays at the round's rate (server/drafts/pace.py, `load`: the
round's rows and expected tokens so far, its decodes counted first), so beside many decodes
only nearly sure drafts are made. A stream
never drafts past the end of its reply (max_tokens, the context), so the rows it writes
are rows plain decoding would write too, within the table admission reserved.
"""
from __future__ import annotations

# What one more row of a stream's chunk adds to a round, as a fraction of a one-row round
# (server/drafts/pace.py drafts only as far as that pays). CPU: the default model on this
# 2-core host under other load, one stream's chunk of 1 / 3 / 5 / 9 rows (every row's
# logits) 41.5 / 99.3 / 116.0 / 183.7 ms: (183.7 / 41.5 - 1) / 8 = 0.43 a row
# (docs/receipts/2026-12-05-drafts/). GPU: a decode round reads every weight once whatever
# its rows, so a few more rows cost little (an estimate, not measured here).
ROW_COST = {"cpu": 0.45, "cuda": 0.05}


def round_drafts(streams, tokens: int, rows_cap: int, prefilling: bool) -> list:
    """streams: [(its StreamDrafts or None, its reply so far, tokens it may still emit)],
    in round order -> one tuple of drafts per stream (empty: a plain decode row)."""
    budget = 0 if prefilling else rows_cap - len(streams)
    rows, expect = len(streams), float(len(streams))   # the round so far: rows, tokens
    out = []
    for src, reply, left in streams:
        k = min(tokens, left - 1, budget)
        d = src.propose(reply, k, (rows, expect)) if src is not None and k > 0 else ()
        if d:
            rows += len(d)
            expect += src.expect(len(d)) - 1
        budget -= len(d)
        out.append(tuple(d))
    return out
