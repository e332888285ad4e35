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

    def close(self):
        pass


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

    def close(self):
        from server.ranks.steps import StopStep
        if self.ok:
            try:
                self.comm.broadcast_step(pack(StopStep(0)))
            except Exception:
                pass
        self.comm.close()
