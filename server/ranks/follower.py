"""The follower loop: ranks > 0 apply rank 0's steps, in rank 0's order, until a stop.

  rank 0:    send_step(comm, step)          followers:  follow(comm, engine)
               -> comm.broadcast_step(words)                 words = comm.broadcast_step(None)
                                                             engine.apply(steps.unpack(words))

Followers never plan: the pool step says how big the pool is, begin steps name the
page ids to map. A follower whose own page bytes differ from what the pool step says
for its shard refuses (RankMismatch) before the engine allocates anything.

Waiting for the next step blocks in the transport (a socket recv on the host link),
which costs no GPU and no CPU while the server is idle. An engine error is reported to
rank 0 (best effort), then raised: the process exits non-zero.
"""
from __future__ import annotations

from typing import Protocol

from server.ranks import steps
from server.ranks.rank_errors import RankMismatch


class FollowerEngine(Protocol):
    def page_bytes(self, page_rows: int) -> int:
        """Bytes of one KV page of `page_rows` rows for this rank's shard."""

    def apply(self, step: steps.Step) -> None:
        """PoolStep: make the pool; BeginStep: map page ids; RoundStep: run the forward
        (its all-reduces go through the comm); EndStep, CopyStep; StopStep: release."""


def send_step(comm, step: steps.Step) -> steps.Step:
    """Rank 0's half: one packed int32 buffer to every follower."""
    comm.broadcast_step(steps.pack(step))
    return step


def check_pool_step(step: steps.PoolStep, rank: int, own_page_bytes: int) -> None:
    if rank >= len(step.page_bytes):
        raise RankMismatch(f"rank {rank}: the pool step lists page bytes for "
                           f"{len(step.page_bytes)} ranks only; start every rank with the same --tp")
    want = step.page_bytes[rank]
    if own_page_bytes != want:
        raise RankMismatch(
            f"rank {rank}: a page of {step.page_rows} rows takes {own_page_bytes} bytes here, but "
            f"rank 0's pool step says {want} for rank {rank}'s shard; refusing before allocating. "
            f"Every rank must load the same model with the same KV dtype")


def follow(comm, engine: FollowerEngine) -> steps.StopStep:
    """Apply steps until a StopStep; returns it. Raises (after telling rank 0) on failure."""
    while True:
        words = comm.broadcast_step(None)       # RankLost here: rank 0 is gone, nobody to tell
        try:
            step = steps.unpack(words)
            if isinstance(step, steps.PoolStep):
                check_pool_step(step, comm.rank, engine.page_bytes(step.page_rows))
            engine.apply(step)
        except Exception as e:
            comm.report_failure(f"rank {comm.rank}: {type(e).__name__}: {e}")
            raise
        if isinstance(step, steps.StopStep):
            return step
