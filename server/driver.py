"""Driver: how rank 0 runs a Step everywhere. At TP=1 it applies it; at TP>1 it first
broadcasts the packed step so the followers apply the same step in the same order."""
from __future__ import annotations

from server.ranks.steps import pack


class LocalDriver:
    ranks = 1

    def __init__(self, engine):
        self.engine = engine
        self.ok = True

    def run(self, step):
        return self.engine.apply(step)

    def check(self):
        pass

    def close(self):
        from server.ranks.steps import StopStep
        self.engine.apply(StopStep(0))


class RankDriver:
    def __init__(self, engine, comm):
        self.engine, self.comm = engine, comm
        self.ranks = comm.world
        self.ok = True

    def run(self, step):
        try:
            self.comm.broadcast_step(pack(step))
            return self.engine.apply(step)
        except Exception:
            self.ok = False
            raise

    def check(self):
        """Raise RankLost if a follower is gone (called by the engine thread while idle)."""
        try:
            self.comm.check_peers()
        except Exception:
            self.ok = False
            raise

    def close(self):
        from server.ranks.steps import StopStep
        if self.ok:
            try:
                self.run(StopStep(0))
            except Exception:
                pass
