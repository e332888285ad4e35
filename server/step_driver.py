"""Driver: how rank 0 runs a Step everywhere. At TP=1 it applies it; at TP>1 it first
broadcasts the packed step so the followers apply the same step in the same order.

A driver also hands the scheduler rank 0's sampling (`driver.sampling`, a
server/host_sampling.HostSampling for the engine's device), so the scheduler, which is
control plane, imports neither numpy nor server/engine.

RankDriver.lost(err) is the heartbeat's verdict (server/ranks/heartbeat.py, from its own
thread): `ok` turns False at once (so /health says 503 at once), `failure` keeps the
RankLost for the scheduler's error, and on NCCL a step in flight is aborted at once (the
comm has already been broken by comm.lose, which wakes a host-link wait by itself)."""
from __future__ import annotations

import logging
import threading
import time

from server.host_sampling import HostSampling
from server.ranks.steps import pack

log = logging.getLogger("foldserve")


class LocalDriver:
    ranks = 1

    def __init__(self, engine):
        self.engine = engine
        self.sampling = HostSampling(engine.device)
        self.ok = True

    def run(self, step):
        return self.engine.apply(step)

    def check(self):
        pass

    def close(self):
        from server.ranks.steps import StopStep
        self.engine.apply(StopStep(0))


class RankDriver:
    def __init__(self, engine, comm, stall_s: float = 3.0):
        self.engine, self.comm = engine, comm
        self.sampling = HostSampling(engine.device)
        self.ranks = comm.world
        self.ok = True
        self.failure = None                  # the RankLost that ended the group, once known
        self.stall_s = stall_s
        self._step_since: float | None = None
        self._watch: threading.Thread | None = None
        if hasattr(comm, "abort"):           # NCCL: a collective with a dead peer never returns
            self._watch = threading.Thread(target=self._watchdog, name="foldserve-watchdog",
                                           daemon=True)
            self._watch.start()

    def run(self, step):
        self._step_since = time.monotonic()
        try:
            self.comm.broadcast_step(pack(step))
            return self.engine.apply(step)
        except Exception:
            self.ok = False
            raise
        finally:
            self._step_since = None

    def lost(self, err) -> None:
        """A peer stopped answering the heartbeat (any thread). On NCCL a collective waiting
        on it never returns by itself: abort it now rather than after stall_s."""
        self.failure = self.failure or err
        self.ok = False
        if self._step_since is not None and hasattr(self.comm, "abort"):
            log.error("%s during a step: aborting the collectives", err)
            self.comm.abort()

    def watch_once(self) -> bool:
        """A step running past stall_s with a peer gone: abort the collectives, so the engine
        thread's step raises instead of waiting forever. True when it aborted."""
        since = self._step_since
        if not self.ok or since is None or time.monotonic() - since < self.stall_s:
            return False
        try:
            self.comm.check_peers()
            return False
        except Exception as e:
            log.error("a step has waited %.1f s and %s: aborting the collectives",
                      time.monotonic() - since, e)
            self.failure = self.failure or e
            self.ok = False
            self.comm.abort()
            return True

    def _watchdog(self):
        while self.ok:
            time.sleep(0.5)
            try:
                if self.watch_once():
                    return
            except Exception:                # the watchdog must never take the server down
                log.exception("watchdog")

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
