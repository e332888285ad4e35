"""The one-call forward (kernels/forward_cpu.py) against the op-by-op path it replaces, on the
default model's own blocks: the same logits and the same K/V pools, byte for byte, for
prefill chunks, decode rounds of one and several streams, mixed rounds, rows without logits,
one stream's verify chunks (2-9 rows: kernels/blocks_vec's few-row tiles; a crew of two's
attention jobs with the last head's rows halved, kernels/forward_cpu `_attend`), pages and
windows. Fails when the fused forward's arithmetic departs from the op-by-op functions' in any
row."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


def _rounds(eng, paged, fused):
    """A script of rounds on 3 streams; returns every round's logits bytes and the pools."""
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    model = eng.model
    keep = model.fused
    if not fused:
        model.fused = None
    try:
        eng.apply(PoolStep(paged, 12 if paged else 3, 16, (eng.page_bytes(16),), 3, 64))
        eng.kv.K[...] = 0                    # rows never written compare equal too
        eng.kv.V[...] = 0
        for s in range(3):
            eng.apply(BeginStep(s, (3 * s + 2, 3 * s, 3 * s + 1) if paged else ()))
        rng = np.random.default_rng(5)
        p = [tuple(int(t) for t in rng.integers(100, 20000, n)) for n in (21, 9, 14)]
        got = []
        script = [
            (Chunk(0, 0, p[0][:13], False),),                       # no logits wanted
            (Chunk(0, 13, p[0][13:], True), Chunk(1, 0, p[1], True)),
            (Chunk(2, 0, p[2], 2),),                                # every row's logits
            (Chunk(0, 21, (7,), True),),                            # decode, one stream
            (Chunk(0, 22, (8,), True), Chunk(1, 9, (9,), True), Chunk(2, 14, (10,), True)),
            (Chunk(1, 10, (11, 12, 13), True), Chunk(2, 15, (14,), True)),
            (Chunk(1, 13, tuple(range(30, 39)), 2),),               # a verify chunk: 9 rows
            (Chunk(0, 23, (40, 41, 42, 43, 44), 2),),               # 5: a 2x5 tile
            (Chunk(2, 16, (45, 46, 47, 48, 49, 50), 2),),           # 6: a 2x6 tile
            # verify chunks of 2, 3, 4, 7 and 8 rows: 3 kv heads' jobs plus the last head's
            # rows in two halves (2 -> 1 + 1, 3 -> 2 + 1: a one-row half), and tile2's shapes
            (Chunk(0, 28, (51, 52), 2),),
            (Chunk(1, 22, (53, 54, 55), 2),),
            (Chunk(2, 22, (56, 57, 58, 59), 2),),
            (Chunk(0, 30, tuple(range(60, 67)), 2),),
            (Chunk(1, 25, tuple(range(70, 78)), 2), Chunk(2, 26, (79,), True)),
            (Chunk(2, 27, tuple(range(80, 88)), 2),),
        ]
        for chunks in script:
            lg = eng.apply(RoundStep(chunks))
            got.append(None if lg is None else np.asarray(lg).tobytes())
        for s in range(3):
            eng.apply(EndStep(s))
        return got, eng.kv.K.tobytes(), eng.kv.V.tobytes()
    finally:
        model.fused = keep


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_fused_forward_equals_the_op_by_op_path(real_model, paged):
    eng = real_model.engine
    assert eng.model.fused is not None, "the default model should take the one-call forward"
    a = _rounds(eng, paged, fused=True)
    b = _rounds(eng, paged, fused=False)
    assert a[0][0] is None and b[0][0] is None
    for i, (x, y) in enumerate(zip(a[0], b[0])):
        assert x == y, f"round {i}: fused logits differ from the op-by-op path's"
    assert a[1] == b[1] and a[2] == b[2], "fused K/V pools differ"


def test_a_member_that_starts_after_the_round_is_done_changes_nothing(real_model):
    """A team of two whose second member starts only once the first has returned (a thread
    descheduled for the whole round): the first takes every piece of every stage, the second
    finds none left, and the bytes are the team's own."""
    eng = real_model.engine
    team = eng.model.fused.team
    want = _rounds(eng, True, fused=True)

    class OneAfterAnother:
        def run(self, n, args):
            team.member(0, 2, *args)
            team.member(1, 2, *args)

    eng.model.fused.team = OneAfterAnother()
    try:
        got = _rounds(eng, True, fused=True)
    finally:
        eng.model.fused.team = team
    assert got == want
