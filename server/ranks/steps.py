"""Steps: the one message rank 0 sends every rank, packed as one int32 buffer.

Rank 0 is the only planner. Every data-plane action (make the pool, map a request's
pages, run a round, free a stream, copy prompt-cache rows, keep or restore a recurrent
state's snapshot, stop) is a Step; followers
apply the same Steps in the same order, so their pools and tables equal rank 0's.

Wire format: [kind, n_words, payload...], all int32.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Union

POOL, BEGIN, ROUND, END, COPY, STOP, SNAP, MTP = 1, 2, 3, 4, 5, 6, 7, 8

# Chunk.logits: which rows' logits a round returns for the chunk
LAST_ROW = True           # (1) the last row's: the next token
EVERY_ROW = 2             # every row's: prompt_logprobs (the last row's is the next token's)


@dataclass(frozen=True)
class PoolStep:
    paged: bool               # pages (True) or whole windows (False)
    pages: int                # pages in the pool (0 on windows, unless a prompt cache needs pages)
    page_rows: int
    page_bytes: tuple         # page bytes for each rank's shard, rank order
    streams: int              # streams at once (the engine's own included)
    context: int              # rows of one window
    poison: bool = False
    verify: int = 1           # the verify window: rows a drafted round may write past those it keeps
    snaps: int = 0            # snapshot slots (recurrent families' prompt cache; 0: none)


@dataclass(frozen=True)
class BeginStep:
    stream: int
    page_ids: tuple           # the stream's table, in row order: row r lives in page_ids[r // page_rows]
    kept: int = 0             # leading pages that hold a kept prefix (shared, not poisoned, not rewritten)


@dataclass(frozen=True)
class Chunk:
    """One stream's part of a round: tokens at positions start .. start+len(tokens)-1."""
    stream: int
    start: int
    tokens: tuple
    logits: int = LAST_ROW    # False: none; LAST_ROW: the last row's; EVERY_ROW: every row's


@dataclass(frozen=True)
class RoundStep:
    chunks: tuple


@dataclass(frozen=True)
class EndStep:
    stream: int


@dataclass(frozen=True)
class CopyStep:
    """Copy KV rows between a window and cache pages (prompt cache on windows).
    to_pages=True: window rows [0, n) of `stream` -> page_ids (-1: a page already kept, skipped);
    False: page_ids -> window rows."""
    stream: int
    page_ids: tuple
    rows: int
    to_pages: bool


@dataclass(frozen=True)
class SnapStep:
    """A snapshot slot (a kept copy of a stream's fixed part: recurrent states and conv
    windows, at a page boundary; the prompt cache's, server/planner/prompt_cache.py). Slot ids
    are rank 0's; every rank keeps its own heads' part under the same id.

      PENDING  from now on, each round that takes `stream`'s state across a page boundary b
               (a chunk with start <= b < end, b > 0: the last such b) writes the state at b
               into `slot` (-1: none); cleared by BeginStep and EndStep
      RESTORE  `stream`'s fixed part := `slot`'s, its state standing at position `at`
      COPY     slot `to` := slot `slot` (a running stream's pending snapshot kept by the cache)"""
    op: int
    slot: int
    stream: int = -1
    at: int = 0
    to: int = -1

    PENDING, RESTORE, COPY = 1, 2, 3


@dataclass(frozen=True)
class MtpChunk:
    """One stream's MTP rows (server/families/nextn.py): positions start .. start+len(tokens)-1,
    row j reading the last round's trunk hidden state at round row src + j and the token
    tokens[j] that followed it; then `depth` drafts: the last row's guess, and depth - 1
    more, each one row on from the one before (rows past the stream's valid ones, rewritten
    by the next pass).

    `defer`: the round was full (no stream may draft next round): the ranks keep the
    chunk's trunk rows for the stream instead (server/engine/mtp_pass.py) and write no MTP
    row. A later chunk of the stream then starts at the first kept row's position: its rows
    read the kept trunk rows first, then the round's from `src` on."""
    stream: int
    start: int
    tokens: tuple
    src: int
    depth: int = 0
    defer: bool = False


@dataclass(frozen=True)
class MtpStep:
    """The MTP layer's rows for the round just run (RoundStep before it, nothing between that
    runs a forward): its KV rows, and each chunk's drafts (rank 0 reads them)."""
    chunks: tuple


@dataclass(frozen=True)
class StopStep:
    reason: int = 0           # 0: shutdown, 1: a rank failed


Step = Union[PoolStep, BeginStep, RoundStep, EndStep, CopyStep, SnapStep, StopStep, MtpStep]


def pack(step: Step) -> list:
    if isinstance(step, PoolStep):
        p = [int(step.paged), step.pages, step.page_rows, step.streams, step.context,
             int(step.poison), len(step.page_bytes), *step.page_bytes, step.verify, step.snaps]
        kind = POOL
    elif isinstance(step, BeginStep):
        p = [step.stream, step.kept, len(step.page_ids), *step.page_ids]
        kind = BEGIN
    elif isinstance(step, RoundStep):
        p = [len(step.chunks)]
        for c in step.chunks:
            p += [c.stream, c.start, int(c.logits), len(c.tokens), *c.tokens]
        kind = ROUND
    elif isinstance(step, EndStep):
        p, kind = [step.stream], END
    elif isinstance(step, CopyStep):
        p = [step.stream, step.rows, int(step.to_pages), len(step.page_ids), *step.page_ids]
        kind = COPY
    elif isinstance(step, SnapStep):
        p, kind = [step.op, step.slot, step.stream, step.at, step.to], SNAP
    elif isinstance(step, StopStep):
        p, kind = [step.reason], STOP
    elif isinstance(step, MtpStep):
        p = [len(step.chunks)]
        for c in step.chunks:
            p += [c.stream, c.start, c.src, c.depth, int(c.defer), len(c.tokens), *c.tokens]
        kind = MTP
    else:
        raise TypeError(f"not a step: {step!r}")
    for v in p:
        if not -2**31 <= v < 2**31:
            raise OverflowError(f"step value {v} does not fit int32")
    return [kind, len(p), *p]


def unpack(words) -> Step:
    w = [int(x) for x in words]
    kind, n, p = w[0], w[1], w[2:2 + w[1]]
    if len(p) != n:
        raise ValueError(f"step truncated: {len(p)} of {n} words")
    if kind == POOL:
        k = p[6]
        return PoolStep(bool(p[0]), p[1], p[2], tuple(p[7:7 + k]), p[3], p[4], bool(p[5]), p[7 + k],
                        p[8 + k])
    if kind == BEGIN:
        return BeginStep(p[0], tuple(p[3:3 + p[2]]), p[1])
    if kind == ROUND:
        chunks, i = [], 1
        for _ in range(p[0]):
            s, start, lg, m = p[i:i + 4]
            chunks.append(Chunk(s, start, tuple(p[i + 4:i + 4 + m]), lg if lg == EVERY_ROW else bool(lg)))
            i += 4 + m
        return RoundStep(tuple(chunks))
    if kind == END:
        return EndStep(p[0])
    if kind == COPY:
        return CopyStep(p[0], tuple(p[4:4 + p[3]]), p[1], bool(p[2]))
    if kind == SNAP:
        return SnapStep(*p[:5])
    if kind == STOP:
        return StopStep(p[0])
    if kind == MTP:
        chunks, i = [], 1
        for _ in range(p[0]):
            s, start, src, depth, defer, m = p[i:i + 6]
            chunks.append(MtpChunk(s, start, tuple(p[i + 6:i + 6 + m]), src, depth,
                                   bool(defer)))
            i += 6 + m
        return MtpStep(tuple(chunks))
    raise ValueError(f"unknown step kind {kind}")
