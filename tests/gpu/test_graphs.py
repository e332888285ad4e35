"""CUDA graphs read only memory that lives as long as they do.

Serving found solo != concurrent on the GPU (0 of 6 replies, docs/receipts/2026-11-29-gpu-serve):
a decode graph's row selector was allocated from cupy's default pool and freed when the
capture returned; eager rounds then reused those bytes and later replays gathered other
rows' logits. Here the default pool is churned between replays with arrays of one value,
which takes the freed blocks, and the replays must still equal an eager round byte for byte.
"""
from __future__ import annotations

import numpy as np

from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep


def test_replay_survives_reuse_of_freed_default_pool_blocks():
    import cupy as cp
    eng = open_model("dummy:smollm2-135m", device="cuda", progress=False).engine
    P, ctx, S = 16, 256, 3                                   # 3 streams: bucket 4, one padding row
    per = ctx // P
    eng.apply(PoolStep(True, per * S, P, (eng.page_bytes(P),), S, ctx))
    prompts = {s: tuple(range(10 + 7 * s, 21 + 7 * s)) for s in range(S)}
    for s in range(S):
        eng.apply(BeginStep(s, tuple(range(s * per, (s + 1) * per))))
    eng.apply(RoundStep(tuple(Chunk(s, 0, prompts[s], True) for s in range(S))))
    step = RoundStep(tuple(Chunk(s, len(prompts[s]), (5 + s,), True) for s in range(S)))
    first = np.asarray(eng.apply(step))                      # captures bucket 4, replays it
    assert eng.model.graphs.graphs and eng.model.graphs.failed is None
    churn = [cp.full(64, 2, dtype=cp.int32) for _ in range(4000)]   # take every freed small block
    again = np.asarray(eng.apply(step))                      # replay (writes the same KV rows)
    eng.model.graphs.enabled = False
    eager = np.asarray(eng.apply(step))
    del churn
    assert first.tobytes() == eager.tobytes()
    assert again.tobytes() == eager.tobytes()
    assert not np.array_equal(eager[0], eager[2])            # rows differ: a wrong gather would show
