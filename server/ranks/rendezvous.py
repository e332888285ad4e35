"""Rendezvous: the ranks find each other over TCP before anything else runs.

  rank 0 listens on MASTER:PORT      rank r > 0 connects (retrying until the timeout)
        <- HELLO(magic, protocol, r, world)
        -> WELCOME, once every rank has arrived  (or ERROR with rank 0's reason)

The result is a Link: rank 0 holds one socket per follower (a hub), each follower
one socket to rank 0. HostComm runs collectives over it; NcclComm uses it to hand
over the NCCL unique id. No numpy here: this is control plane.
"""
from __future__ import annotations

import logging
import socket
import struct
import time
from dataclasses import dataclass, field
from typing import Mapping

from server.config import ConfigError
from server.ranks import wire
from server.ranks.rank_errors import JoinError, JoinTimeout, RankMismatch

PROTOCOL = 2                 # bump when frames or steps change shape (2: the heartbeat connection)
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 29551
_MAGIC = b"FSRV"
_HELLO = struct.Struct("<4sIII")   # magic, protocol, rank, world
_GRACE_S = 5.0               # a follower waits this much past rank 0's timeout for its verdict
WAITING_EVERY_S = 5.0        # rank 0 says who is missing this often while it waits

log = logging.getLogger("foldserve")


@dataclass
class Link:
    rank: int
    world: int
    host: str
    port: int
    peers: dict = field(default_factory=dict)   # rank 0: {rank: socket}, ranks 1..world-1
    hub: socket.socket | None = None            # followers: the socket to rank 0
    listener: socket.socket | None = None       # rank 0: still listening, for the heartbeat's connections

    def close(self) -> None:
        for s in [*self.peers.values(), self.hub, self.listener]:
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass
        self.peers, self.hub, self.listener = {}, None, None


def address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def parse_master(text: str) -> tuple[str, int]:
    """'HOST:PORT', '[v6]:PORT' or 'HOST' (default port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        host, port = text.split(":")
    else:
        host, port = text, ""
    if not host:
        raise ConfigError(f"--master {text!r} has no host; use HOST:PORT, e.g. 10.0.0.1:{DEFAULT_PORT}")
    return host, _port(port, f"--master {text!r}") if port else DEFAULT_PORT


def _port(value, what: str) -> int:
    try:
        port = int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what}: port {value!r} is not a number") from None
    if not 0 < port < 65536:
        raise ConfigError(f"{what}: port {port} is outside 1..65535")
    return port


def _int(value, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} is not a whole number") from None


def _merge(flag: str, arg, var: str, env_value, parse):
    """The flag or the variable; both given and different is an error."""
    if env_value in (None, ""):
        return arg
    from_env = parse(env_value, f"{var}={env_value!r}")
    if arg is not None and arg != from_env:
        raise ConfigError(f"{flag} {arg} and {var}={env_value} disagree; give one of them")
    return from_env


def from_env_or_args(args_rank: int | None, args_world: int | None, args_master: str | None,
                     environ: Mapping[str, str]) -> tuple[int, int, str, int]:
    """(rank, world, host, port) from the flags and torchrun's RANK, WORLD_SIZE,
    MASTER_ADDR, MASTER_PORT (passed in: environment variables are read in config.py)."""
    rank = _merge("--rank", args_rank, "RANK", environ.get("RANK"), _int)
    world = _merge("--tp", args_world, "WORLD_SIZE", environ.get("WORLD_SIZE"), _int)
    rank = 0 if rank is None else rank
    world = 1 if world is None else world
    if args_master is not None:
        host, port = parse_master(args_master)
        _merge("--master host", host, "MASTER_ADDR", environ.get("MASTER_ADDR"), lambda v, _: v)
        _merge("--master port", port, "MASTER_PORT", environ.get("MASTER_PORT"), _port)
    else:
        host = environ.get("MASTER_ADDR") or DEFAULT_HOST
        port = _port(environ["MASTER_PORT"], "MASTER_PORT") if environ.get("MASTER_PORT") else DEFAULT_PORT
    if world < 1:
        raise ConfigError(f"TP size {world} must be at least 1")
    if not 0 <= rank < world:
        raise ConfigError(f"rank {rank} is outside 0..{world - 1} for TP size {world}")
    return rank, world, host, port


def join(rank: int, world: int, master_host: str, master_port: int, timeout_s: float) -> Link:
    """Form the group: returns once every rank has arrived, or raises JoinTimeout/JoinError."""
    if world == 1:
        return Link(rank, world, master_host, master_port)
    if rank == 0:
        return _host(world, master_host, master_port, timeout_s)
    return _follow(rank, world, master_host, master_port, timeout_s)


def _host(world: int, host: str, port: int, timeout_s: float) -> Link:
    where = address(host, port)
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host, port), family=family, backlog=world)
    except OSError as e:
        raise JoinError(f"rank 0: cannot listen on {where}: {e}; is another foldserve "
                        f"using that port, and is {host} an address of this host?") from None
    # the listener stays open on the Link: each follower opens its heartbeat connection to
    # the same address next (server/ranks/heartbeat.py), which then closes it
    link = Link(0, world, host, port, listener=listener)
    start = time.monotonic()
    deadline, say_at = start + timeout_s, start + WAITING_EVERY_S
    try:
        while len(link.peers) < world - 1:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise JoinTimeout(_missing_message(link, timeout_s, where))
            if now >= say_at:
                log.info("foldserve: %s", _missing_message(link, timeout_s, where, now - start))
                say_at = now + WAITING_EVERY_S
            listener.settimeout(max(0.01, min(left, say_at - now)))
            try:
                conn, _ = listener.accept()
            except socket.timeout:
                continue
            _admit(link, conn, min(left, _GRACE_S))
        for s in link.peers.values():
            wire.send(s, wire.WELCOME)
        return link
    except Exception as e:
        for s in link.peers.values():     # tell the ranks already here why they must stop
            try:
                wire.send(s, wire.ERROR, str(e).encode())
            except OSError:
                pass
        link.close()
        raise


def _admit(link: Link, conn: socket.socket, hello_timeout: float) -> None:
    """Read a newcomer's hello; a stray connection that sends no hello is dropped."""
    try:
        conn.settimeout(hello_timeout)
        tag, payload = wire.recv(conn)
        magic, protocol, rank, world = _HELLO.unpack(bytes(payload))
        if tag != wire.HELLO or magic != _MAGIC:
            raise ValueError("not a foldserve hello")
    except (OSError, ValueError, struct.error):
        conn.close()
        return
    problem = None
    if protocol != PROTOCOL:
        problem = (f"ranks disagree on protocol version: rank 0 has {PROTOCOL}, rank {rank} has "
                   f"{protocol}; run the same foldserve version on every host")
    elif world != link.world:
        problem = (f"ranks disagree on TP size: rank 0 has {link.world}, rank {rank} has {world}; "
                   f"start every rank with the same --tp")
    elif not 0 < rank < link.world:
        problem = f"rank 0: a rank {rank} joined, outside 1..{link.world - 1}; check --rank"
    elif rank in link.peers:
        problem = f"rank 0: rank {rank} joined twice; give each process its own --rank"
    if problem:
        try:
            wire.send(conn, wire.ERROR, problem.encode())
        finally:
            conn.close()
        raise RankMismatch(problem)
    conn.settimeout(None)
    wire.tune(conn)
    link.peers[rank] = conn
    link.peers = dict(sorted(link.peers.items()))


def _missing_message(link: Link, timeout_s: float, where: str, waited: float | None = None) -> str:
    missing = [r for r in range(1, link.world) if r not in link.peers]
    if len(missing) == 1:
        who, verbs = f"rank {missing[0]}", "is it started, and can it"
    else:
        who = "ranks " + ", ".join(map(str, missing[:-1])) + f" and {missing[-1]}"
        verbs = "are they started, and can they"
    took = f"{timeout_s:g} s" if waited is None else f"{waited:.0f} s of {timeout_s:g} s"
    return f"rank 0: waiting for {who} of {link.world} ({took}); {verbs} reach {where}?"


def _follow(rank: int, world: int, host: str, port: int, timeout_s: float) -> Link:
    where = address(host, port)
    deadline = time.monotonic() + timeout_s
    last = "none"                    # a timeout of 0 s is over before the first try
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise JoinTimeout(f"rank {rank}: waiting for rank 0 at {where} ({timeout_s:g} s); is it "
                              f"started, and can this host reach {where}? (last try: {last})")
        try:
            sock = socket.create_connection((host, port), timeout=min(left, 2.0))
            break
        except OSError as e:
            last = e.strerror or str(e)
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
    try:
        wire.send(sock, wire.HELLO, _HELLO.pack(_MAGIC, PROTOCOL, rank, world))
        # rank 0 answers once every rank is here, or says why not; it owns the timeout,
        # so wait a full timeout (and a grace) from now, not from this rank's start
        sock.settimeout(timeout_s + _GRACE_S)
        try:
            tag, payload = wire.recv(sock)
        except socket.timeout:
            raise JoinTimeout(f"rank {rank}: rank 0 at {where} did not say that every rank arrived "
                              f"({timeout_s + _GRACE_S:g} s); check rank 0's log") from None
        except OSError as e:
            raise JoinError(f"rank {rank}: rank 0 at {where} closed the connection during the "
                            f"join ({e}); check rank 0's log") from None
        if tag == wire.ERROR:     # rank 0's own words: which rank is missing, or what is wrong
            raise JoinError(payload.decode())
        if tag != wire.WELCOME:
            raise JoinError(f"rank {rank}: unexpected {wire.TAG_NAMES[tag]} frame from rank 0 during the join")
        sock.settimeout(None)
        wire.tune(sock)
        return Link(rank, world, host, port, hub=sock)
    except BaseException:
        sock.close()
        raise
