"""Heartbeat: rank 0 knows within --peer-timeout that a follower stopped answering.

A collective notices a dead peer (EOF, reset), but not a frozen one: a follower that is
SIGSTOPped, stuck in a driver call or behind a dead NIC keeps its sockets open and says
nothing. So every follower also answers pings, on a connection of its own beside the
collectives' link (opened to the same rank 0 address right after the join), from a small
thread of its own:

  rank 0     Monitor: every `interval` sends HEARTBEAT(seq) to each follower and reads
             the echoes. A follower with a ping unanswered and nothing heard from it for
             `timeout_s` is lost, and so is one whose heartbeat connection drops: the
             monitor calls every on_lost callback once with a RankLost, and stops.
  followers  Responder: echoes each ping at once; ends when rank 0's end closes. A rank 0
             that sends no ping for `timeout_s` is lost: the responder calls its on_lost
             callbacks once with RankLost(0, ...) (the follower's comm breaks and it stops
             with one line), so a frozen rank 0 does not leave its followers waiting forever.

While the ranks start (model load, fingerprints, the pool) the monitor allows a longer
silence (the join timeout): a load may hold a follower's interpreter for seconds in one
C call (a cast of a large tensor), and nothing is served yet. set_timeout() arms the
peer timeout once serving begins (a follower's, as it starts following steps).

The engine thread never touches these sockets, so a long step (a follower busy for
minutes in a forward) does not delay an answer: numpy, cupy and NCCL release the GIL
while they work, and the responder needs it only for a few microseconds a ping. The
monitor reads every echo that has arrived before it judges, so rank 0 itself being slow
(its own thread starved for a while) never makes a live follower look lost.

No numpy here: control plane.
"""
from __future__ import annotations

import logging
import select
import socket
import struct
import threading
import time

from server.ranks import wire
from server.ranks.rank_errors import JoinError, JoinTimeout, RankLost
from server.ranks.rendezvous import PROTOCOL, Link, address

log = logging.getLogger("foldserve")

_MAGIC = b"FSHB"
_HELLO = struct.Struct("<4sII")     # magic, protocol, rank
_SEQ = struct.Struct("<I")


def lost_detail(timeout_s: float) -> str:
    return (f"no answer to the heartbeat for {timeout_s:g} s (stopped, hung, or its host "
            f"unreachable)")


# ---- the connections -------------------------------------------------------------------

def accept(link: Link, timeout_s: float) -> dict[int, socket.socket]:
    """Rank 0: one heartbeat connection from every follower, on the join's listener (closed
    afterwards). A stray connection that sends no heartbeat hello is dropped."""
    listener, want = link.listener, set(link.peers)
    if listener is None:
        raise JoinError("rank 0: the join's listener is closed; the heartbeat cannot start")
    socks: dict[int, socket.socket] = {}
    deadline = time.monotonic() + timeout_s
    try:
        while set(socks) != want:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = ", ".join(str(r) for r in sorted(want - set(socks)))
                raise JoinTimeout(
                    f"rank 0: rank {missing} joined but did not open its heartbeat connection "
                    f"to {address(link.host, link.port)} within {timeout_s:g} s; run the same "
                    f"foldserve version on every rank")
            listener.settimeout(left)
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            rank = _read_hello(conn, min(left, 5.0))
            if rank is None or rank not in want or rank in socks:
                conn.close()
                continue
            wire.tune(conn)
            socks[rank] = conn
        return socks
    except BaseException:
        for s in socks.values():
            s.close()
        raise
    finally:
        listener.close()
        link.listener = None


def _read_hello(conn: socket.socket, timeout: float) -> int | None:
    try:
        conn.settimeout(timeout)
        tag, payload = wire.recv(conn)
        magic, protocol, rank = _HELLO.unpack(bytes(payload))
    except (OSError, ValueError, struct.error):
        return None
    if tag != wire.HEARTBEAT or magic != _MAGIC or protocol != PROTOCOL:
        return None
    return rank


def connect(link: Link, timeout_s: float) -> socket.socket:
    """A follower: open its heartbeat connection to rank 0 (the address it joined at)."""
    where = address(link.host, link.port)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            sock = socket.create_connection((link.host, link.port),
                                            timeout=max(0.1, min(2.0, deadline - time.monotonic())))
            break
        except OSError as e:
            if time.monotonic() >= deadline:
                raise JoinError(f"rank {link.rank}: cannot open the heartbeat connection to rank 0 "
                                f"at {where}: {e.strerror or e}") from None
            time.sleep(0.1)
    try:
        wire.send(sock, wire.HEARTBEAT, _HELLO.pack(_MAGIC, PROTOCOL, link.rank))
    except OSError as e:
        sock.close()
        raise JoinError(f"rank {link.rank}: the heartbeat connection to rank 0 at {where} "
                        f"dropped: {e}") from None
    sock.settimeout(None)
    wire.tune(sock)
    return sock


# ---- rank 0 ----------------------------------------------------------------------------

class _Verdict:
    """A lost rank, said once: `on_lost` callbacks (added before or after) get the first
    RankLost given, each exactly once; later ones are dropped. Shared by both sides."""

    def _init_verdict(self) -> None:
        self.lost: RankLost | None = None
        self._callbacks: list = []
        self._lock = threading.Lock()

    def on_lost(self, callback) -> None:
        """callback(RankLost), from the heartbeat's thread; at once if a rank is lost already."""
        with self._lock:
            lost = self.lost
            if lost is None:
                self._callbacks.append(callback)
        if lost is not None:
            callback(lost)

    def _give(self, err: RankLost) -> bool:
        """Record err as the verdict and run the callbacks; False if one was given already."""
        with self._lock:
            if self.lost is not None:
                return False
            self.lost = err
            callbacks, self._callbacks = self._callbacks, []
        for cb in callbacks:
            try:
                cb(err)
            except Exception:
                log.exception("heartbeat: on_lost")
        return True


class Monitor(_Verdict):
    """Rank 0's thread: pings every follower, calls on_lost once when one stops answering."""

    def __init__(self, socks: dict[int, socket.socket], timeout_s: float,
                 interval_s: float | None = None):
        if timeout_s <= 0:
            raise ValueError(f"peer timeout {timeout_s:g} s must be positive")
        self.socks = dict(socks)
        self.timeout_s = timeout_s
        self.interval_s = interval_s or min(0.5, timeout_s / 5)
        self._wake_r, self._wake_w = socket.socketpair()    # set_timeout and stop wake the wait
        self._init_verdict()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foldserve-heartbeat", daemon=True)

    def start(self) -> "Monitor":
        self._thread.start()
        return self

    def set_timeout(self, timeout_s: float, interval_s: float | None = None) -> None:
        """From now on a rank silent for timeout_s is lost (the peer timeout, once serving)."""
        if timeout_s <= 0:
            raise ValueError(f"peer timeout {timeout_s:g} s must be positive")
        self.timeout_s = timeout_s
        self.interval_s = interval_s or min(0.5, timeout_s / 5)
        self._wake()

    def stop(self) -> None:
        self._stop.set()
        self._wake()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(5)
        for s in [*self.socks.values(), self._wake_r, self._wake_w]:
            try:
                s.close()
            except OSError:
                pass

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x", socket.MSG_DONTWAIT)
        except OSError:
            pass

    # -- the thread --

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:                   # the monitor must never take rank 0 down
            log.exception("heartbeat monitor")

    def _loop(self) -> None:
        now = time.monotonic()
        heard = {r: now for r in self.socks}        # when an echo last arrived
        waiting = {r: False for r in self.socks}    # a ping sent and not echoed yet
        seq, next_ping = 0, now
        while not self._stop.is_set():
            now = time.monotonic()
            if now >= next_ping:
                seq = (seq + 1) & 0xFFFFFFFF
                for r, s in self.socks.items():
                    try:
                        s.settimeout(1.0)
                        wire.send(s, wire.HEARTBEAT, _SEQ.pack(seq))
                    except OSError as e:
                        return self._lose(r, f"its heartbeat connection dropped ({_why(e)})")
                    waiting[r] = True
                next_ping = now + self.interval_s
            # wait for echoes until the next ping or the first deadline, whichever is sooner
            due = min([next_ping] + [heard[r] + self.timeout_s for r in self.socks if waiting[r]])
            ready, _, _ = select.select([*self.socks.values(), self._wake_r], [], [],
                                        max(0.0, due - time.monotonic()))
            if self._wake_r in ready:
                try:
                    self._wake_r.recv(64, socket.MSG_DONTWAIT)
                except OSError:
                    pass
                next_ping = min(next_ping, time.monotonic() + self.interval_s)
            for r, s in self.socks.items():
                if s not in ready:
                    continue
                problem = self._drain(s, r, heard, waiting, seq)
                if problem:
                    return self._lose(r, problem)
            now = time.monotonic()          # judged only after every echo that arrived was read
            for r in self.socks:
                if waiting[r] and now - heard[r] > self.timeout_s:
                    return self._lose(r, lost_detail(self.timeout_s))

    @staticmethod
    def _drain(s, r, heard, waiting, seq) -> str | None:
        """Read every frame waiting on s; a problem in words, or None."""
        while True:
            try:
                s.settimeout(1.0)
                tag, payload = wire.recv(s)
            except OSError as e:
                return f"its heartbeat connection dropped ({_why(e)})"
            if tag == wire.HEARTBEAT and len(payload) == _SEQ.size:
                heard[r] = time.monotonic()
                if _SEQ.unpack(payload)[0] == seq:
                    waiting[r] = False
            elif tag == wire.ERROR:
                return f"it reported: {payload.decode(errors='replace')}"
            else:
                return f"a {wire.TAG_NAMES.get(tag, tag)} frame on its heartbeat connection"
            ready, _, _ = select.select([s], [], [], 0)
            if not ready:
                return None

    def _lose(self, rank: int, detail: str) -> None:
        # not logged here: whoever the verdict stops says it once (the scheduler's "engine
        # loop stopped: rank 1 lost: ...", or the start-up's one-line error)
        if not self._give(RankLost(rank, detail)):
            return
        for s in self.socks.values():       # a follower that resumes finds its end closed
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


# ---- followers -------------------------------------------------------------------------

class Responder(_Verdict):
    """A follower's thread: echoes rank 0's pings until the connection closes, and calls
    every on_lost callback once with RankLost(0, ...) when no ping has come for timeout_s
    (rank 0 frozen: SIGSTOPped, hung, its host unreachable; it pings every 0.5 s or more
    often, idle or busy). A connection that closes is no verdict: rank 0 stopping closes it,
    and the collectives' link says why it went."""

    def __init__(self, sock: socket.socket, timeout_s: float | None = None):
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"peer timeout {timeout_s:g} s must be positive")
        self.sock = sock
        self.timeout_s = timeout_s              # None: never judge (tests of rank 0's side)
        self._init_verdict()
        self._heard = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="foldserve-heartbeat", daemon=True)

    def start(self) -> "Responder":
        self._heard = time.monotonic()
        self._thread.start()
        return self

    def set_timeout(self, timeout_s: float) -> None:
        """From now on rank 0 silent for timeout_s is lost (the peer timeout, once serving)."""
        if timeout_s <= 0:
            raise ValueError(f"peer timeout {timeout_s:g} s must be positive")
        self.timeout_s = timeout_s

    def _run(self) -> None:
        try:
            while True:
                if self.timeout_s is not None:
                    left = self._heard + self.timeout_s - time.monotonic()
                    # a short wait, so a set_timeout() is heeded within a second
                    ready, _, _ = select.select([self.sock], [], [], max(0.0, min(left, 1.0)))
                    if not ready:
                        if time.monotonic() - self._heard <= self.timeout_s:
                            continue
                        # one more look before judging: this process may itself have been
                        # stopped; a ping, an EOF or rank 0's verdict waiting there wins
                        ready, _, _ = select.select([self.sock], [], [], 0)
                        if not ready:
                            return self._lose(rank0_silent(self.timeout_s))
                self.sock.settimeout(None)
                tag, payload = wire.recv(self.sock)
                if tag != wire.HEARTBEAT:
                    return
                self._heard = time.monotonic()
                wire.send(self.sock, wire.HEARTBEAT, payload)
        except (OSError, ValueError):       # rank 0 closed it, or is gone: the link says why
            return

    def _lose(self, detail: str) -> None:
        self._give(RankLost(0, detail))     # the comm breaks: the follower stops with one line

    def stop(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(2)
        self.sock.close()


def rank0_silent(timeout_s: float) -> str:
    return (f"no heartbeat from it for {timeout_s:g} s (stopped, hung, or its host "
            f"unreachable); restart every rank")


def start(link: Link, timeout_s: float, join_timeout_s: float):
    """After the join: rank 0 gets a started Monitor, a follower a started Responder, both
    judging by timeout_s (the start-up allowance; set_timeout() arms the peer timeout
    later); None at TP=1."""
    if link.world == 1:
        return None
    if link.rank == 0:
        return Monitor(accept(link, join_timeout_s), timeout_s).start()
    return Responder(connect(link, join_timeout_s), timeout_s).start()


def _why(e: OSError) -> str:
    return e.strerror or str(e) or type(e).__name__
