"""A round's rows, in the two forms the forward reads.

RoundChunk: one stream's piece of a round, as the engine addresses it (its table of page ids
on this rank's KV store, the rows a page holds, the first position, the token ids, whether
which rows' logits are wanted: none, the last, or every row for prompt_logprobs; a window-kind
store's ring table; and the stream's slot, where its fixed part lives: recurrent layers'
states). A NamedTuple, so a plain 5-tuple in the same order (the
benchmarks and the GPU tests build them) reads the same.

Rows: the whole round laid out as [T, ...] arrays, chunk c covering rows spans[c].
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


def as_chunks(chunks) -> list:
    """chunks as RoundChunks (plain 5-tuples in RoundChunk's order are taken as they are)."""
    return [c if type(c) is RoundChunk else RoundChunk(*c) for c in chunks]


class RoundChunk(NamedTuple):
    table: tuple           # page ids of the stream (a window: one page of `context` rows)
    page_rows: int         # rows a page holds
    start: int             # position of the chunk's first token
    tokens: tuple          # token ids
    logits: int            # False: none; True (1): the last row's; 2 (steps.EVERY_ROW): every row's
    ring: tuple = ()       # the stream's ring page ids (KV window kind's window layers), row order
    slot: int = -1         # the stream's slot in the store's fixed part (recurrent layers'
                           # states); -1: none given (a family without a fixed part)
    snap: tuple = ()       # (snapshot slot, offset k): the state after the chunk's first k
                           # positions is written into that slot (SnapStep.PENDING); (): none


@dataclass
class Rows:
    """One round's rows: chunk c covers rows spans[c] of the round's [T, ...] arrays."""
    chunks: list           # [RoundChunk]
    spans: list            # [(a, b)]
    ids: object            # [T] int32 token ids
    pos: object            # [T] int32 positions
    sel: object            # [n_wanted] int32 rows whose logits are returned, or None
    dev: object = None     # GPU: kernels.attention_cuda.RoundMap (tables, slots, tiles)
    cpu: object = None     # CPU over GGUF blocks: kernels.attention_cpu.plan (cos/sin, tables)
