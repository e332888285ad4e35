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
# (server/drafts/pace.py drafts only as far as that pays), by the keys the stream's rows read.
# CPU: the default model on this 2-core host under other load, with a chunk's rows sharing
# their key reads (kernels/attention_cpu.row_groups): a one-row round 14.3 ms + 0.0206 ms a
# key, each more row of the chunk 7.5 ms + 0.0009 ms a key (one stream's chunk of 1 and 9
# rows at 40 and 1,000 keys: 15.1 / 34.9 and 75.5 / 102.4 ms, docs/receipts/2026-12-05-
# drafts-2/verify_profile.txt), so a row costs 0.52 of a round at 0 keys, 0.39 at 300,
# 0.24 at 1,000, 0.17 at 2,000. GPU: a decode round reads every weight once whatever its
# rows, so a few more rows cost little (an estimate, not measured here).
CPU_ROUND_MS, CPU_ROUND_KEY_MS = 14.3, 0.0206
CPU_ROW_MS, CPU_ROW_KEY_MS = 7.5, 0.0009


def cpu_row_cost(keys: int) -> float:
    """The CPU's row cost (above) for a stream whose rows read `keys` keys."""
    return (CPU_ROW_MS + CPU_ROW_KEY_MS * keys) / (CPU_ROUND_MS + CPU_ROUND_KEY_MS * keys)


# a device's row cost: a fraction, or a function of the keys (the stream's length)
ROW_COST = {"cpu": cpu_row_cost, "cuda": 0.05}

# What a lone stream's verify chunk of 1, 2, ..., 9 rows costs, in one-row rounds: a
# staircase, not a line, since the block products take a chunk's last rows in tiles (one
# pass over the blocks up to 6 rows; 7-9 one pass of two loops, two passes in down:
# kernels/blocks_vec `_make_rows`). CPU:
# the default model on this 2-core host, the scheduler's own forward by the chunk's rows in
# a drafted editing request (bench/drafts_profile.py, ~1,150-1,550 keys) over the plain
# request's one-row round: the mean of receipt 2026-12-05-drafts35's quiet profile_ab.txt
# and docs/receipts/2026-12-05-drafts36/profile_new1.txt rep 1 (bench/verify_rows.py's
# rounds, whose one-row round costs twice the scheduler's, put the steps 5-15 % lower:
# sizes_*.txt there). The pace uses it where the stream's rows are the whole round
# (server/drafts/pace.py); a device without one: None. 7-9 rows are priced above what they
# cost now (kernels/blocks_vec `tile2`: 2.79, 3.09, 3.09 against 3.05, 3.39, 3.36 side by
# side, receipt 2026-12-05-vr36): priced at cost, the pace drafts ~10 % more on the editing
# set and takes no more (the replay 1.76x against 1.84x; through the server 1.52x against
# 1.64x), so the table keeps the two-pass prices.
CHUNK_COST = {"cpu": (1.0, 1.19, 1.46, 1.63, 1.87, 2.19, 2.83, 2.80, 3.0), "cuda": None}


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
