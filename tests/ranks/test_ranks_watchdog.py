"""On NCCL a collective whose peer died never returns: rank 0's watchdog sees a step stalled
past its limit with a peer gone, aborts the communicator, and the stalled step raises."""
from __future__ import annotations

import threading
import time

import pytest

from server.step_driver import RankDriver
from server.ranks.steps import EndStep
from stand_ins import HangingComm, HangingEngine


def test_a_stalled_step_with_a_lost_peer_is_aborted():
    comm = HangingComm()
    drv = RankDriver(HangingEngine(comm), comm, stall_s=0.5)
    comm.peer_dead = True
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="NCCL error"):
        drv.run(EndStep(0))
    assert time.monotonic() - t0 < 5
    assert comm.aborted.is_set() and drv.ok is False


def test_a_slow_step_with_every_peer_alive_is_left_alone():
    comm = HangingComm()
    drv = RankDriver(HangingEngine(comm), comm, stall_s=0.2)
    done = threading.Event()

    def release():
        time.sleep(1.5)                  # the step takes long, but nobody is lost
        done.set()
        comm.aborted.set()

    threading.Thread(target=release, daemon=True).start()
    with pytest.raises(RuntimeError):
        drv.run(EndStep(0))
    assert done.is_set(), "the watchdog aborted a step whose peers were all alive"
