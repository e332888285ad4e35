"""Stand-ins for an NCCL communicator and an engine whose collective never returns, shared
by the watchdog and heartbeat tests."""
from __future__ import annotations

import threading

from server.ranks.rank_errors import RankLost


class HangingComm:
    """Stands in for NcclComm: broadcast passes, the step's collective blocks until abort()."""
    world, rank = 2, 0

    def __init__(self):
        self.aborted = threading.Event()
        self.peer_dead = False

    def broadcast_step(self, words):
        return words

    def check_peers(self):
        if self.peer_dead:
            raise RankLost(1, "connection closed by the peer")

    def abort(self):
        self.aborted.set()


class HangingEngine:
    device = "cpu"

    def __init__(self, comm):
        self.comm = comm

    def apply(self, step):
        if not self.comm.aborted.wait(30):
            raise AssertionError("never aborted")
        raise RuntimeError("NCCL error: remote process exited or there was a network error")
