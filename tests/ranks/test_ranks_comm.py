"""HostComm between real rank processes: exact collectives, and a lost peer never hangs."""
from __future__ import annotations

import os
import signal
import time

import numpy as np
import pytest

from rank_procs import HOST, run
from server.ranks.comm import HostComm
from server.ranks.rank_errors import RankLost
from server.ranks.rendezvous import join

# values where float32 addition order shows: (a0 + a1) + a2 differs from a0 + (a1 + a2)
PARTS = np.array([[1e8, 1.0, 0.1, 3.0],
                  [1.0, -1e8, 0.2, 5.0],
                  [-1e8, 1e8, 0.3, 7.0]], dtype=np.float32)
STEPS = [[1, 2, 3], [], [2**31 - 1, -2**31, 0], list(range(1000))]


def connect(rank, world, port, timeout_s=None):
    return HostComm(join(rank, world, HOST, port, 10.0), timeout_s=timeout_s)


def collectives(rank, world, port):
    comm = connect(rank, world, port, timeout_s=10)
    got = [comm.broadcast_step(s if rank == 0 else None) for s in STEPS]
    x = PARTS[rank].copy()
    y = comm.all_reduce(x)
    gathered = comm.all_gather_bytes(bytes([rank]) * rank)     # rank 0 gives b""
    comm.barrier()
    comm.close()
    return got, y is x, x.tobytes(), gathered


@pytest.mark.parametrize("world", [2, 3])
def test_collectives_are_exact_and_in_rank_order(world):
    res = run(collectives, world)
    assert res.left_behind == []
    total = PARTS[0].copy()
    for r in range(1, world):
        total += PARTS[r]                  # rank order, float32
    for r, o in res.outcomes.items():
        assert (o.status, o.exitcode) == ("ok", 0), o
        got, in_place, summed, gathered = o.value
        assert got == STEPS
        assert in_place
        assert summed == total.tobytes()
        assert gathered == [bytes([i]) * i for i in range(world)]
    if world == 3:                          # the order is visible: a different order gives other bits
        other = PARTS[0] + (PARTS[1] + PARTS[2])
        assert other.tobytes() != total.tobytes()


def killed_follower(rank, world, port, poll):
    comm = connect(rank, world, port)      # no timeout: the loss must come from the socket
    comm.barrier()
    if rank == world - 1:
        os.kill(os.getpid(), signal.SIGKILL)
    t0 = time.monotonic()
    if rank == 0 and poll:                  # idle rank 0: the health check notices
        while True:
            comm.check_peers()
            time.sleep(0.05)
    comm.all_reduce(np.ones(4, np.float32))
    return time.monotonic() - t0


@pytest.mark.parametrize("world,poll", [(2, False), (3, False), (2, True)])
def test_killed_follower_raises_rank_lost_promptly(world, poll):
    res = run(killed_follower, world, poll, deadline_s=20)
    assert res.left_behind == []
    lead = res.outcomes[0]
    assert (lead.error, lead.lost_rank) == ("RankLost", world - 1), lead
    assert lead.exitcode == 1 and lead.seconds < 10
    if world == 3:                          # the survivor is told why by rank 0, not left waiting
        mid = res.outcomes[1]
        assert (mid.error, mid.lost_rank) == ("RankLost", 0), mid
        assert "rank 2 lost" in mid.message


def killed_leader(rank, world, port):
    comm = connect(rank, world, port)
    comm.barrier()
    if rank == 0:
        os.kill(os.getpid(), signal.SIGKILL)
    comm.broadcast_step(None)              # an idle follower waiting for the next step


def test_follower_sees_rank_0_die():
    res = run(killed_leader, 2, deadline_s=20)
    assert res.left_behind == []
    o = res.outcomes[1]
    assert (o.error, o.lost_rank, o.exitcode) == ("RankLost", 0, 1), o
    assert "connection" in o.message


def hung_follower(rank, world, port):
    comm = connect(rank, world, port, timeout_s=1.0)
    comm.barrier()
    if rank == 1:
        time.sleep(2.5)                    # stops answering past rank 0's timeout
    comm.all_reduce(np.ones(4, np.float32))


def test_silent_follower_times_out_and_is_told():
    res = run(hung_follower, 2, deadline_s=20)
    assert res.left_behind == []
    lead, late = res.outcomes[0], res.outcomes[1]
    assert lead.message == "rank 1 lost: no answer in 1 s"
    assert (late.error, late.lost_rank) == ("RankLost", 0)
    assert late.message == "rank 0 lost: it reported: rank 1 lost: no answer in 1 s"


def test_world_of_one_needs_no_peers():
    comm = HostComm(join(0, 1, HOST, 1, 1.0))
    x = np.arange(3, dtype=np.float32)
    assert comm.broadcast_step([7, 8]) == [7, 8]
    assert comm.all_reduce(x) is x and x.tolist() == [0, 1, 2]
    assert comm.all_gather_bytes(b"fp") == [b"fp"]
    comm.barrier()
    comm.close()


def test_a_gathered_list_reaches_every_follower_before_a_loss_report():
    """Rank 0 sends the gathered list to the followers one by one. A follower that gets it
    first and stops on its verdict (a fingerprint mismatch) drops its heartbeat; rank 0's
    monitor then calls lose(), whose report to the others must not come before their copy
    of the list, or they stop naming the lost rank instead of the mismatch (CI, TP=3)."""
    import socket
    import threading

    from server.ranks import wire
    from server.ranks.rendezvous import Link

    pairs = {r: socket.socketpair() for r in (1, 2)}
    comm = None
    loser = []

    class Rank2End:
        """rank 0's socket to rank 2; when rank 0 turns to it after rank 1 has its copy,
        the monitor's lose(rank 1) runs first (as a descheduled rank 0 would let it)."""

        def __init__(self, s):
            self.s = s

        def __getattr__(self, name):
            return getattr(self.s, name)

        def settimeout(self, t):
            if not loser and got_copy(pairs[1][1]):
                th = threading.Thread(target=comm.lose, args=(
                    RankLost(1, "its heartbeat connection dropped"),))
                loser.append(th)
                th.start()
                th.join(0.6)                   # time enough for the report to overtake
            self.s.settimeout(t)

    def got_copy(b) -> bool:
        import select
        return bool(select.select([b], [], [], 0)[0])

    for r, (_, b) in pairs.items():
        wire.send(b, wire.GATHER, bytes([r]))
    assert not got_copy(pairs[1][1])
    link = Link(rank=0, world=3, host=HOST, port=0,
                peers={1: pairs[1][0], 2: Rank2End(pairs[2][0])})
    comm = HostComm(link, timeout_s=5)
    assert comm.all_gather_bytes(b"") == [b"", b"\x01", b"\x02"]
    assert loser, "the loss was not staged"
    loser[0].join(5)
    follower = pairs[2][1]
    follower.settimeout(5)
    tag, payload = wire.recv(follower)
    assert (tag, wire.unpack_list(payload)) == (wire.GATHER, [b"", b"\x01", b"\x02"]), payload
    tag, payload = wire.recv(follower)        # then the report: nothing is lost
    assert tag == wire.ERROR and b"rank 1" in payload
    for a, b in pairs.values():
        a.close()
        b.close()
