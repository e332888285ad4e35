"""The arithmetic that makes solo == concurrent and resumed == fresh hold on this machine's BLAS."""
from __future__ import annotations

import numpy as np

from kernels import matmul
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep


def test_matmul_rows_do_not_depend_on_the_batch():
    rng = np.random.default_rng(1)
    w = rng.standard_normal((96, 200)).astype(np.float32)
    x = rng.standard_normal((53, 96)).astype(np.float32)
    alone = np.stack([matmul.ref(x[i:i + 1], w)[0] for i in range(len(x))])
    for m in (2, 7, 16, 17, 33, 53):
        together = matmul.ref(x[:m], w)
        assert together.tobytes() == alone[:m].tobytes(), m


def _logits(eng, chunks_per_round):
    out = []
    for rnd in chunks_per_round:
        lg = eng.apply(RoundStep(tuple(rnd)))
        if lg is not None:
            out.extend(row.tobytes() for row in lg)
    return out


def test_chunking_and_company_do_not_change_logits():
    eng = open_model("dummy:tiny", progress=False).engine
    eng.apply(PoolStep(True, 40, 4, (eng.page_bytes(4),), 3, 64))
    rng = np.random.default_rng(0)
    a = tuple(int(t) for t in rng.integers(3, 500, 21))
    b = tuple(int(t) for t in rng.integers(3, 500, 9))
    eng.apply(BeginStep(0, tuple(range(0, 8))))
    solo = _logits(eng, [[Chunk(0, 0, a, True)]])
    # the same prompt in chunks of 5, beside another stream's prefill, on other pages
    eng.apply(BeginStep(1, tuple(range(39, 31, -1))))
    eng.apply(BeginStep(2, tuple(range(10, 18))))
    rounds, pos = [], 0
    while pos < len(a):
        n = min(5, len(a) - pos)
        rnd = [Chunk(1, pos, a[pos:pos + n], pos + n == len(a))]
        if pos < len(b):
            rnd.append(Chunk(2, pos, b[pos:pos + 5], False))
        rounds.append(rnd)
        pos += n
    mixed = _logits(eng, rounds)
    assert solo == mixed
