"""The heartbeat: a follower that stops answering is lost after the peer timeout, idle or
busy; one that answers never is, however long its steps; the verdict wakes a collective
waiting on that follower and reaches the follower itself should it resume.

In one process, over real sockets: rank 0 and rank 1 join from two threads. A frozen
follower is a heartbeat connection nobody answers (what a SIGSTOPped process looks like
from rank 0); tests/ranks/test_serve_ranks.py stops real processes.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from rank_procs import HOST
from server.step_driver import RankDriver
from server.ranks import heartbeat, wire
from server.ranks.comm import HostComm
from server.ranks.rank_errors import JoinTimeout, RankLost
from server.ranks.rendezvous import join
from server.ranks.steps import EndStep
from stand_ins import HangingComm, HangingEngine
from free_ports import free_port as _free_port


def free_port() -> int:
    return _free_port(HOST)   # below the ephemeral range: tests/free_ports.py


def pair(follower_heartbeat: bool | str = True):
    """(rank 0's link, rank 1's link, rank 1's heartbeat socket or Responder)."""
    port = free_port()
    got = {}

    def follower():
        link = join(1, 2, HOST, port, 10.0)
        got["link"] = link
        if follower_heartbeat == "none":
            return
        sock = heartbeat.connect(link, 10.0)
        got["beat"] = heartbeat.Responder(sock).start() if follower_heartbeat is True else sock

    t = threading.Thread(target=follower)
    t.start()
    link0 = join(0, 2, HOST, port, 10.0)
    t.join(10)
    return link0, got["link"], got.get("beat")


class Verdicts:
    def __init__(self):
        self.got: list[tuple[float, RankLost]] = []
        self.event = threading.Event()

    def __call__(self, err):
        self.got.append((time.monotonic(), err))
        self.event.set()


def test_a_follower_that_stops_answering_is_lost_after_the_peer_timeout():
    link0, link1, sock = pair(follower_heartbeat="silent")      # connected, never answers
    monitor = heartbeat.Monitor(heartbeat.accept(link0, 5.0), timeout_s=0.6).start()
    verdicts = Verdicts()
    monitor.on_lost(verdicts)
    t0 = time.monotonic()
    assert verdicts.event.wait(5), "a silent follower was never lost"
    (at, err), = verdicts.got
    assert 0.5 <= at - t0 < 1.5, at - t0
    assert isinstance(err, RankLost) and err.rank == 1
    assert str(err) == ("rank 1 lost: no answer to the heartbeat for 0.6 s (stopped, hung, "
                        "or its host unreachable)")
    late = Verdicts()                       # registered after the verdict: told at once
    monitor.on_lost(late)
    assert late.got == [(late.got[0][0], err)]
    # the follower's end is shut: should it resume, it reads EOF, not another ping
    sock.settimeout(2)
    frames = []
    try:
        while True:
            frames.append(wire.recv(sock)[0])
    except ConnectionError:
        pass
    assert set(frames) <= {wire.HEARTBEAT}
    monitor.stop()
    link0.close(), link1.close(), sock.close()


def test_an_answering_follower_is_never_lost_however_busy_its_process():
    link0, link1, responder = pair()
    monitor = heartbeat.Monitor(heartbeat.accept(link0, 5.0), timeout_s=0.3).start()
    verdicts = Verdicts()
    monitor.on_lost(verdicts)
    # a "step" of 2 s (7 peer timeouts) in this process: numpy work and pure-Python work
    t0 = time.monotonic()
    a = np.random.default_rng(0).standard_normal((400, 400)).astype(np.float32)
    while time.monotonic() - t0 < 1.0:
        a = (a @ a) / np.float32(400.0)
    n = 0
    while time.monotonic() - t0 < 2.0:
        n += 1
    assert not verdicts.event.wait(0.5), verdicts.got
    monitor.stop()
    responder.stop()
    link0.close(), link1.close()


def test_a_dropped_heartbeat_connection_is_a_lost_rank_at_once():
    link0, link1, sock = pair(follower_heartbeat="silent")
    monitor = heartbeat.Monitor(heartbeat.accept(link0, 5.0), timeout_s=30).start()
    verdicts = Verdicts()
    monitor.on_lost(verdicts)
    t0 = time.monotonic()
    sock.close()                            # the follower died: its kernel closes the socket
    assert verdicts.event.wait(5)
    (at, err), = verdicts.got
    assert at - t0 < 1.5 and err.rank == 1 and "heartbeat connection dropped" in str(err)
    monitor.stop()
    link0.close(), link1.close()


def test_a_follower_that_never_opens_its_heartbeat_connection_is_named():
    link0, link1, _ = pair(follower_heartbeat="none")
    with pytest.raises(JoinTimeout, match="rank 1 joined but did not open its heartbeat "
                                          "connection .* within 0.5 s"):
        heartbeat.accept(link0, 0.5)
    assert link0.listener is None           # closed either way
    link0.close(), link1.close()


def test_lose_wakes_a_collective_waiting_on_the_peer_and_tells_the_peer():
    link0, link1, responder = pair()
    comm0, comm1 = HostComm(link0, timeout_s=60), HostComm(link1, timeout_s=60)
    x = np.ones(4, np.float32)
    raised = {}

    def reduce_on_rank0():                  # rank 1 never sends its part: a frozen follower
        try:
            comm0.all_reduce(x)
        except RankLost as e:
            raised["err"], raised["at"] = e, time.monotonic()

    t = threading.Thread(target=reduce_on_rank0)
    t.start()
    time.sleep(0.3)
    t0 = time.monotonic()
    verdict = RankLost(1, heartbeat.lost_detail(5.0))
    comm0.lose(verdict)
    t.join(5)
    assert raised["err"] is verdict and raised["at"] - t0 < 1.0
    with pytest.raises(RankLost) as later:  # broken for good
        comm0.broadcast_step([1])
    assert later.value is verdict
    # the follower, resuming, stops with rank 0's reason instead of serving on
    with pytest.raises(RankLost, match="rank 0 lost: it reported: rank 0 gave up on rank 1: no "
                                       "answer to the heartbeat for 5 s .*restart every rank"):
        comm1.broadcast_step(None)
    responder.stop()
    comm0.close(), comm1.close()


def test_the_verdict_aborts_a_step_in_flight_on_nccl_at_once():
    comm = HangingComm()
    drv = RankDriver(HangingEngine(comm), comm, stall_s=60)   # the stall rule alone: a minute
    verdict = RankLost(1, heartbeat.lost_detail(5.0))
    threading.Timer(0.3, drv.lost, args=(verdict,)).start()
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="NCCL error"):
        drv.run(EndStep(0))
    assert time.monotonic() - t0 < 3
    assert comm.aborted.is_set() and drv.ok is False and drv.failure is verdict


def test_the_verdict_while_idle_marks_the_driver_without_aborting():
    comm = HangingComm()
    drv = RankDriver(HangingEngine(comm), comm)
    verdict = RankLost(1, "x")
    drv.lost(verdict)
    assert drv.ok is False and drv.failure is verdict and not comm.aborted.is_set()


def test_the_heartbeat_is_control_plane():
    import subprocess
    import sys
    code = ("import sys, server.ranks.heartbeat, server.ranks.rendezvous, server.ranks.steps; "
            "bad = [m for m in ('numpy', 'cupy') if m in sys.modules]; print(bad); sys.exit(bool(bad))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_the_start_up_allowance_then_the_peer_timeout():
    """While the ranks load, a silence up to the join timeout is allowed; once serving,
    set_timeout arms the peer timeout and a silent follower is lost by it."""
    link0, link1, sock = pair(follower_heartbeat="silent")
    monitor = heartbeat.Monitor(heartbeat.accept(link0, 5.0), timeout_s=30).start()
    verdicts = Verdicts()
    monitor.on_lost(verdicts)
    assert not verdicts.event.wait(1.0)      # silent for 1 s: within the allowance
    t0 = time.monotonic()
    monitor.set_timeout(0.5)
    assert verdicts.event.wait(5)
    (at, err), = verdicts.got
    assert at - t0 < 1.0 and "for 0.5 s" in str(err)
    monitor.stop()
    link0.close(), link1.close(), sock.close()


def test_at_tp3_the_other_follower_hears_the_verdict():
    port = free_port()
    links = {}
    ts = [threading.Thread(target=lambda r=r: links.__setitem__(r, join(r, 3, HOST, port, 10.0)))
          for r in (1, 2)]
    for t in ts:
        t.start()
    links[0] = join(0, 3, HOST, port, 10.0)
    for t in ts:
        t.join(10)
    comms = {r: HostComm(links[r], timeout_s=10) for r in range(3)}
    comms[0].lose(RankLost(1, heartbeat.lost_detail(5.0)))
    with pytest.raises(RankLost, match="rank 0 lost: it reported: rank 1 lost: no answer to "
                                       "the heartbeat for 5 s"):
        comms[2].broadcast_step(None)
    with pytest.raises(RankLost, match="rank 0 gave up on rank 1"):
        comms[1].broadcast_step(None)
    for c in comms.values():
        c.close()


# ---- the followers' side: a frozen rank 0 -------------------------------------------------

def test_a_follower_whose_rank_0_goes_silent_stops_with_one_line():
    """Rank 0 SIGSTOPped, as its followers see it: the heartbeat connection stays open and
    no ping comes. The responder's verdict breaks the follower's comm, so its wait for the
    next step ends with RankLost(0) within the peer timeout (it used to wait forever)."""
    port = free_port()
    got = {}

    def follower():
        link = join(1, 2, HOST, port, 10.0)
        got["link"] = link
        got["responder"] = heartbeat.Responder(heartbeat.connect(link, 10.0), 0.6).start()

    t = threading.Thread(target=follower)
    t.start()
    link0 = join(0, 2, HOST, port, 10.0)
    socks = heartbeat.accept(link0, 5.0)            # connected, and never a ping: frozen
    t.join(10)
    link1, responder = got["link"], got["responder"]
    comm1 = HostComm(link1, timeout_s=60)
    verdicts = Verdicts()
    responder.on_lost(verdicts)                     # first: the callbacks run in order, and
    responder.on_lost(comm1.lose)                   # the raise below may beat a later one
    t0 = time.monotonic()
    with pytest.raises(RankLost) as caught:
        comm1.broadcast_step(None)                  # the follower's idle wait for a step
    took = time.monotonic() - t0
    assert 0.5 <= took < 2.0, took
    assert caught.value.rank == 0
    assert str(caught.value) == ("rank 0 lost: no heartbeat from it for 0.6 s (stopped, hung, "
                                 "or its host unreachable); restart every rank")
    assert [e for _, e in verdicts.got] == [caught.value]
    responder.stop()
    for s in socks.values():
        s.close()
    link0.close(), link1.close()


def test_a_follower_hears_rank_0_pinging_and_judges_nothing_and_an_eof_is_no_verdict():
    link0, link1, _ = pair(follower_heartbeat="none")
    got = {}
    t = threading.Thread(target=lambda: got.update(r=heartbeat.Responder(
        heartbeat.connect(link1, 10.0), 0.4).start()))
    t.start()
    monitor = heartbeat.Monitor(heartbeat.accept(link0, 5.0), timeout_s=5.0).start()
    t.join(10)
    responder, verdicts = got["r"], Verdicts()
    responder.on_lost(verdicts)
    monitor.set_timeout(5.0, interval_s=0.1)        # pings every 0.1 s, the follower's limit 0.4
    assert not verdicts.event.wait(1.5), verdicts.got
    monitor.stop()                                  # rank 0 stopping cleanly closes its end
    assert not verdicts.event.wait(1.0), verdicts.got
    responder.stop()
    link0.close(), link1.close()
