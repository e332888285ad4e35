"""The step wire format, word for word: every field of every step survives pack/unpack,
a value past int32 is refused before sending, and a short or unknown buffer is refused."""
from __future__ import annotations

import pytest

from server.ranks import steps as S

STEPS = [
    S.PoolStep(paged=True, pages=9, page_rows=4, page_bytes=(4096, 2048), streams=3, context=17,
               poison=True, snaps=5),
    S.PoolStep(paged=False, pages=0, page_rows=16, page_bytes=(8,), streams=5, context=31),
    S.BeginStep(stream=2, page_ids=(7, 3, 5), kept=1),
    S.BeginStep(stream=0, page_ids=()),
    S.RoundStep(chunks=(S.Chunk(1, 5, (11, 12, 13), True), S.Chunk(0, 0, (21,), False),
                        S.Chunk(3, 2, (), True))),
    S.RoundStep(chunks=()),
    S.EndStep(stream=4),
    S.CopyStep(stream=1, page_ids=(-1, 6, 2), rows=11, to_pages=True),
    S.CopyStep(stream=2, page_ids=(4,), rows=3, to_pages=False),
    S.StopStep(),
    S.StopStep(reason=1),
    S.PoolStep(paged=False, pages=5, page_rows=2, page_bytes=(1, 2, 3), streams=4, context=6),
    S.RoundStep(chunks=(S.Chunk(2, 0, (4, 5, 6), S.EVERY_ROW), S.Chunk(1, 3, (7,), S.LAST_ROW),
                        S.Chunk(0, 1, (8, 9), False))),      # prompt_logprobs: every row's logits
    S.SnapStep(S.SnapStep.PENDING, 3, stream=2),
    S.SnapStep(S.SnapStep.PENDING, -1, stream=0),
    S.SnapStep(S.SnapStep.RESTORE, 1, stream=4, at=48),
    S.SnapStep(S.SnapStep.COPY, 2, to=6),
]

WORDS = {
    0: [S.POOL, 11, 1, 9, 4, 3, 17, 1, 2, 4096, 2048, 1, 5],    # ..., page_bytes, verify, snaps
    2: [S.BEGIN, 6, 2, 1, 3, 7, 3, 5],
    4: [S.ROUND, 17, 3, 1, 5, 1, 3, 11, 12, 13, 0, 0, 0, 1, 21, 3, 2, 1, 0],
    6: [S.END, 1, 4],
    7: [S.COPY, 7, 1, 11, 1, 3, -1, 6, 2],
    10: [S.STOP, 1, 1],
    15: [S.SNAP, 5, S.SnapStep.RESTORE, 1, 4, 48, -1],           # op, slot, stream, at, to
    16: [S.SNAP, 5, S.SnapStep.COPY, 2, -1, 0, 6],
    12: [S.ROUND, 19, 3, 2, 0, 2, 3, 4, 5, 6, 1, 3, 1, 1, 7, 0, 1, 0, 2, 8, 9],
}


@pytest.mark.parametrize("i", range(len(STEPS)))
def test_every_step_round_trips(i):
    step = STEPS[i]
    words = S.pack(step)
    assert words[1] == len(words) - 2
    assert S.unpack(words) == step
    assert S.unpack(words + [99, 98]) == step          # trailing words are not read


@pytest.mark.parametrize("i", sorted(WORDS))
def test_the_words_are_the_documented_layout(i):
    assert S.pack(STEPS[i]) == WORDS[i]


def test_kinds_are_distinct_and_fixed():
    assert (S.POOL, S.BEGIN, S.ROUND, S.END, S.COPY, S.STOP, S.SNAP) == (1, 2, 3, 4, 5, 6, 7)
    assert (S.SnapStep.PENDING, S.SnapStep.RESTORE, S.SnapStep.COPY) == (1, 2, 3)


@pytest.mark.parametrize("v", [2**31 - 1, -2**31])
def test_int32_edges_fit(v):
    assert S.unpack(S.pack(S.EndStep(v))) == S.EndStep(v)


@pytest.mark.parametrize("v", [2**31, -2**31 - 1])
def test_past_int32_is_refused(v):
    with pytest.raises(OverflowError, match=str(v)):
        S.pack(S.EndStep(v))
    with pytest.raises(OverflowError):
        S.pack(S.BeginStep(0, (1, v)))


def test_short_unknown_and_foreign_buffers_are_refused():
    w = S.pack(STEPS[2])
    with pytest.raises(ValueError, match="step truncated: 5 of 6 words"):
        S.unpack(w[:-1])
    with pytest.raises(ValueError, match="unknown step kind 42"):
        S.unpack([42, 0])
    with pytest.raises(ValueError, match="step truncated: 0 of 1 words"):
        S.unpack([S.END, 1])
    with pytest.raises(TypeError, match="not a step"):
        S.pack(("begin", 1))


def test_defaults():
    assert S.BeginStep(1, (2,)).kept == 0 and S.Chunk(0, 0, (1,)).logits is True
    assert S.StopStep().reason == 0 and S.PoolStep(True, 1, 1, (1,), 1, 1).poison is False


def test_counted_lists_are_read_to_their_count_only():
    # buffers whose n_words runs past a list: the list is still its own count long
    pool = S.pack(S.PoolStep(True, 3, 4, (8, 9), 1, 4))
    longer = [pool[0], pool[1] + 1, *pool[2:], 77]
    assert S.unpack(longer).page_bytes == (8, 9)
    begin = S.pack(S.BeginStep(1, (4, 5), 0))
    assert S.unpack([begin[0], begin[1] + 1, *begin[2:], 77]).page_ids == (4, 5)
    copy = S.pack(S.CopyStep(1, (4, 5), 3, True))
    assert S.unpack([copy[0], copy[1] + 1, *copy[2:], 77]).page_ids == (4, 5)
    rnd = S.pack(S.RoundStep((S.Chunk(0, 1, (2, 3)),)))
    assert S.unpack([rnd[0], rnd[1] + 1, *rnd[2:], 77]).chunks[0].tokens == (2, 3)
