"""Followers apply rank 0's steps in rank 0's order; a wrong page size refuses before allocating."""
from __future__ import annotations

import numpy as np

from rank_procs import HOST, run
from server.ranks import steps
from server.ranks.comm import HostComm
from server.ranks.follower import follow, send_step
from server.ranks.rendezvous import join

PAGE_BYTES = (4096, 4096, 2048)       # rank 2's shard is smaller (an uneven head split)
SCRIPT = [
    steps.PoolStep(paged=True, pages=8, page_rows=4, page_bytes=PAGE_BYTES, streams=2, context=16),
    steps.BeginStep(stream=0, page_ids=(3, 1)),
    steps.BeginStep(stream=1, page_ids=(0,)),
    steps.RoundStep(chunks=(steps.Chunk(0, 0, (11, 12, 13)), steps.Chunk(1, 0, (21,), False))),
    steps.RoundStep(chunks=(steps.Chunk(0, 3, (14,)),)),
    steps.CopyStep(stream=1, page_ids=(5,), rows=1, to_pages=True),
    steps.EndStep(stream=1),
    steps.RoundStep(chunks=(steps.Chunk(0, 4, (15,)),)),
    steps.EndStep(stream=0),
    steps.StopStep(),
]


class FakeEngine:
    """Records the steps it applied; a round step runs one all-reduce, as a TP forward does."""

    def __init__(self, comm, page_bytes):
        self.comm, self._page_bytes = comm, page_bytes
        self.applied, self.sums = [], []

    def page_bytes(self, page_rows):
        return self._page_bytes

    def apply(self, step):
        self.applied.append(step)
        if isinstance(step, steps.RoundStep):
            x = np.full(2, self.comm.rank + 1, np.float32)
            self.sums.append(self.comm.all_reduce(x).tolist())


def lead_and_follow(rank, world, port, wrong_rank):
    comm = HostComm(join(rank, world, HOST, port, 10.0), timeout_s=10)
    own = PAGE_BYTES[rank] * (2 if rank == wrong_rank else 1)
    engine = FakeEngine(comm, own)
    if rank == 0:
        for step in SCRIPT:
            engine.apply(send_step(comm, step))
    else:
        follow(comm, engine)
    comm.close()
    return [steps.pack(s) for s in engine.applied], engine.sums


def test_followers_apply_the_same_steps_in_the_same_order():
    res = run(lead_and_follow, 3, -1, deadline_s=30)
    assert res.left_behind == []
    want = [steps.pack(s) for s in SCRIPT]
    for o in res.outcomes.values():
        assert (o.status, o.exitcode) == ("ok", 0), o
        applied, sums = o.value
        assert applied == want
        assert sums == [[6.0, 6.0]] * 3           # 1 + 2 + 3 in each round, on every rank


def test_a_follower_with_other_page_bytes_refuses_before_allocating():
    res = run(lead_and_follow, 3, 2, deadline_s=30)
    assert res.left_behind == []
    bad, lead, good = res.outcomes[2], res.outcomes[0], res.outcomes[1]
    assert bad.error == "RankMismatch" and bad.exitcode == 1
    assert bad.message.startswith("rank 2: a page of 4 rows takes 4096 bytes here, but rank 0's "
                                  "pool step says 2048 for rank 2's shard; refusing before allocating")
    # rank 0 hears of it at its next collective (the first round's all-reduce) and names rank 2
    assert (lead.error, lead.lost_rank, lead.exitcode) == ("RankLost", 2, 1)
    assert "it reported: rank 2: RankMismatch: rank 2: a page of 4 rows" in lead.message
    # rank 1 is stopped by rank 0 instead of waiting for a round that never comes
    assert (good.error, good.lost_rank) == ("RankLost", 0)


class ScriptComm:
    """A comm of one follower fed from a list, to look inside the follower loop."""

    def __init__(self, rank, script):
        self.rank, self.world = rank, 3
        self.words = [steps.pack(s) for s in script]
        self.reported = []

    def broadcast_step(self, words):
        return self.words.pop(0)

    def report_failure(self, detail):
        self.reported.append(detail)


def test_the_refusal_comes_before_the_engine_sees_the_pool_step():
    comm = ScriptComm(2, SCRIPT)
    engine = FakeEngine(comm, 4096)
    try:
        follow(comm, engine)
        raise AssertionError("follow accepted a pool step of other page bytes")
    except Exception as e:
        assert type(e).__name__ == "RankMismatch"
    assert engine.applied == []
    assert comm.reported and comm.reported[0].startswith("rank 2: RankMismatch: rank 2: a page of 4 rows")


def test_follow_returns_the_stop_step():
    comm = ScriptComm(1, [steps.BeginStep(0, (1,)), steps.StopStep(reason=1)])
    engine = FakeEngine(comm, 4096)
    assert follow(comm, engine) == steps.StopStep(reason=1)
    assert engine.applied == [steps.BeginStep(0, (1,)), steps.StopStep(reason=1)]
