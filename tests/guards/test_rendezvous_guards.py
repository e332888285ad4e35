"""Rendezvous, in process: every flag/variable clash and bad value is refused with its own
words, every master form parses, and a join (threads, real sockets) names what is wrong."""
from __future__ import annotations

import logging
import socket
import struct
import threading
import time

import pytest

from server.config import ConfigError
from server.ranks import rendezvous as rv
from server.ranks import wire
from server.ranks.rank_errors import JoinError, JoinTimeout, RankMismatch
from free_ports import free_port as _free_port

HOST = "127.0.0.1"
ENV = {"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}


def free_port() -> int:
    return _free_port(HOST)   # below the ephemeral range: tests/free_ports.py


@pytest.mark.parametrize("args, env, msg", [
    ((1, None, None), {"RANK": "2"}, "--rank 1 and RANK=2 disagree; give one of them"),
    ((None, 2, None), {"WORLD_SIZE": "3"}, "--tp 2 and WORLD_SIZE=3 disagree; give one of them"),
    ((None, None, "10.0.0.2:29500"), ENV,
     "--master host 10.0.0.2 and MASTER_ADDR=10.0.0.1 disagree; give one of them"),
    ((None, None, "10.0.0.1:29501"), ENV,
     "--master port 29501 and MASTER_PORT=29500 disagree; give one of them"),
    ((None, None, None), {"WORLD_SIZE": "x"}, "WORLD_SIZE='x' is not a whole number"),
    ((None, None, None), {"RANK": "1.5"}, "RANK='1.5' is not a whole number"),
    ((None, None, None), {"MASTER_PORT": "p"}, "MASTER_PORT: port 'p' is not a number"),
    ((None, None, None), {"MASTER_PORT": "0"}, "MASTER_PORT: port 0 is outside 1..65535"),
    ((None, None, "h:65536"), {}, "--master 'h:65536': port 65536 is outside 1..65535"),
    ((None, None, "h:x"), {}, "--master 'h:x': port 'x' is not a number"),
    ((None, None, ":5"), {}, "--master ':5' has no host; use HOST:PORT, e.g. 10.0.0.1:29551"),
    ((0, 0, None), {}, "TP size 0 must be at least 1"),
    ((-1, 2, None), {}, "rank -1 is outside 0..1 for TP size 2"),
    ((2, 2, None), {}, "rank 2 is outside 0..1 for TP size 2"),
    ((None, None, None), {"MASTER_PORT": "29500", "MASTER_ADDR": "h", "RANK": "1", "WORLD_SIZE": "1"},
     "rank 1 is outside 0..0 for TP size 1"),
])
def test_each_clash_and_bad_value_is_refused_in_its_own_words(args, env, msg):
    with pytest.raises(ConfigError) as e:
        rv.from_env_or_args(*args, env)
    assert str(e.value) == msg


def test_what_agrees_or_is_empty_is_taken():
    assert rv.from_env_or_args(2, 3, "10.0.0.1:29500", ENV) == (2, 3, "10.0.0.1", 29500)
    empty = {"RANK": "", "WORLD_SIZE": "", "MASTER_ADDR": "", "MASTER_PORT": ""}
    assert rv.from_env_or_args(1, 2, None, empty) == (1, 2, "127.0.0.1", 29551)
    assert rv.from_env_or_args(None, None, None, {"MASTER_ADDR": "m"}) == (0, 1, "m", 29551)
    assert rv.from_env_or_args(None, 4, "h", {"RANK": "3"}) == (3, 4, "h", 29551)
    assert rv.from_env_or_args(0, 1, None, {"MASTER_PORT": "65535"})[3] == 65535
    assert rv.from_env_or_args(0, 1, None, {"MASTER_PORT": "1"})[3] == 1


@pytest.mark.parametrize("text, want", [
    ("[::1]:29600", ("::1", 29600)), ("[::1]", ("::1", 29551)), ("[::1]xy", ("::1", 29551)),
    ("[a]b]", ("a", 29551)), ("h:1", ("h", 1)), (" h:80 ", ("h", 80)), ("h", ("h", 29551)),
    ("fe80::1", ("fe80::1", 29551)), ("h:", ("h", 29551)),
])
def test_master_forms(text, want):
    assert rv.parse_master(text) == want


def test_address_brackets_v6_only():
    assert rv.address("::1", 5) == "[::1]:5" and rv.address("h", 5) == "h:5"


def threads(specs, port, timeout_s=3.0):
    out = {}

    def one(i, rank, world):
        try:
            out[i] = rv.join(rank, world, HOST, port, timeout_s)
        except Exception as e:
            out[i] = e
    ts = [threading.Thread(target=one, args=(i, r, w)) for i, (r, w) in enumerate(specs)]
    for i, t in enumerate(ts):
        t.start()
        if i == 0:
            time.sleep(0.05)
    for t in ts:
        t.join(15)
    return out


def test_a_join_of_three_links_rank_0_to_each_follower():
    out = threads([(0, 3), (2, 3), (1, 3)], free_port())
    lead, two, one = out[0], out[1], out[2]
    try:
        assert list(lead.peers) == [1, 2] and lead.hub is None
        assert (lead.rank, lead.world, lead.host) == (0, 3, HOST)
        assert (one.rank, two.rank, one.world) == (1, 2, 3) and one.hub is not None
        assert one.peers == {} and one.hub.gettimeout() is None
        assert all(s.gettimeout() is None for s in lead.peers.values())
    finally:
        for x in out.values():
            x.close()
    assert lead.peers == {} and lead.hub is None and one.hub is None
    lead.close()                                     # twice: nothing left to close


def test_world_one_joins_alone():
    link = rv.join(0, 1, "h", 5, 0.1)
    assert (link.rank, link.world, link.host, link.port, link.peers, link.hub) == (0, 1, "h", 5, {}, None)


def hello(port, magic=b"FSRV", protocol=rv.PROTOCOL, rank=1, world=2, tag=wire.HELLO):
    s = socket.create_connection((HOST, port))
    wire.send(s, tag, struct.pack("<4sIII", magic, protocol, rank, world))
    return s


def lead(port, world=2, timeout_s=2.0):
    out = {}

    def run():
        try:
            out["link"] = rv.join(0, world, HOST, port, timeout_s)
        except Exception as e:
            out["err"] = e
    t = threading.Thread(target=run)
    t.start()
    time.sleep(0.1)
    return t, out


@pytest.mark.parametrize("kw, msg", [
    (dict(protocol=rv.PROTOCOL + 1), f"ranks disagree on protocol version: rank 0 has {rv.PROTOCOL}, "
     f"rank 1 has {rv.PROTOCOL + 1}; run the same foldserve version on every host"),
    (dict(rank=2), "rank 0: a rank 2 joined, outside 1..1; check --rank"),
    (dict(rank=0), "rank 0: a rank 0 joined, outside 1..1; check --rank"),
    (dict(world=3), "ranks disagree on TP size: rank 0 has 2, rank 1 has 3; start every rank with the same --tp"),
])
def test_a_bad_hello_is_answered_with_the_reason_and_stops_rank_0(kw, msg):
    port = free_port()
    t, out = lead(port)
    s = hello(port, **kw)
    s.settimeout(3)
    tag, payload = wire.recv(s)
    s.close()
    t.join(5)
    assert tag == wire.ERROR and payload.decode() == msg
    assert isinstance(out["err"], RankMismatch) and str(out["err"]) == msg


@pytest.mark.parametrize("kw", [dict(magic=b"HTTP"), dict(tag=wire.WELCOME)])
def test_a_foreign_hello_is_dropped_and_the_join_goes_on(kw):
    port = free_port()
    t, out = lead(port)
    s = hello(port, **kw)
    s.settimeout(3)
    with pytest.raises((OSError, Exception)):
        wire.recv(s)                                  # closed without an answer
    s.close()
    link = rv.join(1, 2, HOST, port, 2.0)
    t.join(5)
    assert list(out["link"].peers) == [1]
    link.close()
    out["link"].close()


def test_a_silent_connection_is_dropped_after_the_grace():
    port = free_port()
    t, out = lead(port, timeout_s=1.0)
    s = socket.create_connection((HOST, port))        # says nothing
    t.join(10)
    s.close()
    assert isinstance(out["err"], JoinTimeout)
    assert str(out["err"]) == (f"rank 0: waiting for rank 1 of 2 (1 s); is it started, and can it "
                               f"reach 127.0.0.1:{port}?")


def test_missing_ranks_are_named():
    link = rv.Link(0, 4, HOST, 1, peers={2: None})
    assert rv._missing_message(link, 2.5, "w") == (
        "rank 0: waiting for ranks 1 and 3 of 4 (2.5 s); are they started, and can they reach w?")
    link = rv.Link(0, 5, HOST, 1, peers={})
    assert "ranks 1, 2, 3 and 4 of 5" in rv._missing_message(link, 1, "w")
    link = rv.Link(0, 2, HOST, 1, peers={})
    assert rv._missing_message(link, 1, "w") == (
        "rank 0: waiting for rank 1 of 2 (1 s); is it started, and can it reach w?")


def test_a_follower_told_an_error_raises_rank_0s_words():
    port = free_port()
    srv = socket.create_server((HOST, port))

    def answer(tag, payload=b""):
        c, _ = srv.accept()
        wire.recv(c)
        wire.send(c, tag, payload)
        time.sleep(0.2)
        c.close()
    t = threading.Thread(target=answer, args=(wire.ERROR, b"rank 0 says no"))
    t.start()
    with pytest.raises(JoinError) as e:
        rv.join(1, 2, HOST, port, 2.0)
    t.join()
    assert str(e.value) == "rank 0 says no"
    t = threading.Thread(target=answer, args=(wire.STEP,))
    t.start()
    with pytest.raises(JoinError) as e:
        rv.join(1, 2, HOST, port, 2.0)
    t.join()
    assert str(e.value) == "rank 1: unexpected broadcast_step frame from rank 0 during the join"
    t = threading.Thread(target=lambda: srv.accept()[0].close())
    t.start()
    with pytest.raises(JoinError) as e:
        rv.join(1, 2, HOST, port, 2.0)
    t.join()
    srv.close()
    assert str(e.value).startswith(f"rank 1: rank 0 at 127.0.0.1:{port} closed the connection during "
                                   "the join (")
    assert str(e.value).endswith("); check rank 0's log")


def test_a_follower_that_gets_no_verdict_times_out(monkeypatch):
    monkeypatch.setattr(rv, "_GRACE_S", 0.2)
    port = free_port()
    srv = socket.create_server((HOST, port))
    t0 = time.monotonic()
    with pytest.raises(JoinTimeout) as e:
        rv.join(1, 2, HOST, port, 0.3)
    srv.close()
    assert time.monotonic() - t0 < 3
    assert str(e.value) == (f"rank 1: rank 0 at 127.0.0.1:{port} did not say that every rank arrived "
                            f"(0.5 s); check rank 0's log")


def test_a_follower_that_cannot_connect_says_the_last_error():
    port = free_port()
    with pytest.raises(JoinTimeout) as e:
        rv.join(1, 2, HOST, port, 0.5)
    assert str(e.value).startswith(f"rank 1: waiting for rank 0 at 127.0.0.1:{port} (0.5 s); is it "
                                   f"started, and can this host reach 127.0.0.1:{port}? (last try: ")
    assert "None)" not in str(e.value)


def test_rank_0_keeps_its_listener_on_the_link_for_the_heartbeat_and_closes_it():
    port = free_port()
    out = threads([(0, 2), (1, 2)], port)
    lead, one = out[0], out[1]
    try:
        assert lead.port == one.port == port
        assert lead.listener is not None and lead.listener.getsockname()[1] == port
        assert one.listener is None
        late = socket.create_connection((HOST, port), timeout=2)   # a heartbeat's connection
        lead.listener.settimeout(2)
        conn, _ = lead.listener.accept()
        conn.close()
        late.close()
    finally:
        for x in out.values():
            x.close()
    assert lead.listener is None
    with pytest.raises(OSError):                     # nothing listens there any more
        socket.create_connection((HOST, port), timeout=1).close()


def test_a_join_over_ipv6_listens_on_an_ipv6_socket():
    try:
        with socket.create_server(("::1", 0), family=socket.AF_INET6) as s:
            port = s.getsockname()[1]
    except OSError:
        pytest.skip("no IPv6 loopback on this host")
    out = {}

    def one(i, rank):
        try:
            out[i] = rv.join(rank, 2, "::1", port, 3.0)
        except Exception as e:
            out[i] = e
    ts = [threading.Thread(target=one, args=(i, r)) for i, r in enumerate((0, 1))]
    ts[0].start()
    time.sleep(0.05)
    ts[1].start()
    for t in ts:
        t.join(10)
    try:
        assert not isinstance(out[0], Exception), out[0]
        assert not isinstance(out[1], Exception), out[1]
        assert out[0].listener.family == socket.AF_INET6 and list(out[0].peers) == [1]
    finally:
        for x in out.values():
            if isinstance(x, rv.Link):
                x.close()


def test_rank_0_says_who_is_missing_every_few_seconds_while_it_waits(monkeypatch, caplog):
    monkeypatch.setattr(rv, "WAITING_EVERY_S", 0.2)
    port = free_port()
    t0 = time.time()
    with caplog.at_level(logging.INFO, logger="foldserve"):
        with pytest.raises(JoinTimeout):
            rv.join(0, 2, HOST, port, 0.5)
    lines = [r for r in caplog.records if r.name == "foldserve" and r.levelno == logging.INFO]
    want = (f"foldserve: rank 0: waiting for rank 1 of 2 (0 s of 0.5 s); is it started, and can "
            f"it reach 127.0.0.1:{port}?")
    assert 1 <= len(lines) <= 2 and all(r.getMessage() == want for r in lines)
    assert lines[0].created - t0 >= 0.18              # not at once: after the first 0.2 s


def test_the_waiting_message_says_how_long_of_the_timeout():
    link = rv.Link(0, 3, HOST, 1, peers={2: None})
    assert rv._missing_message(link, 60, "w", 12.4) == (
        "rank 0: waiting for rank 1 of 3 (12 s of 60 s); is it started, and can it reach w?")


def test_a_follower_link_names_rank_0s_address():
    port = free_port()
    out = threads([(0, 2), (1, 2)], port)
    try:
        assert (out[1].rank, out[1].world, out[1].host, out[1].port) == (1, 2, HOST, port)
    finally:
        for x in out.values():
            x.close()


def test_the_followers_already_there_hear_why_the_join_failed():
    port = free_port()
    out = threads([(0, 3), (1, 3)], port, timeout_s=0.5)      # rank 2 never comes
    assert isinstance(out[0], JoinTimeout)
    assert type(out[1]) is JoinError and str(out[1]) == str(out[0])
    assert str(out[0]) == (f"rank 0: waiting for rank 2 of 3 (0.5 s); is it started, and can it "
                           f"reach 127.0.0.1:{port}?")


def connects(monkeypatch):
    """Record each connect attempt's timeout; the attempt itself is the real one."""
    tries, real = [], socket.create_connection

    def spy(addr, timeout=None, *a, **kw):
        tries.append(timeout)
        return real(addr, timeout, *a, **kw)
    monkeypatch.setattr(rv.socket, "create_connection", spy)
    return tries


def test_one_connect_attempt_waits_at_most_2_s(monkeypatch):
    port = free_port()
    t, out = lead(port, timeout_s=5.0)
    tries = connects(monkeypatch)
    link = rv.join(1, 2, HOST, port, 10.0)
    t.join(5)
    link.close()
    out["link"].close()
    assert tries == [2.0]                             # not the 10 s left, nor no limit


def test_a_connect_that_hangs_gives_up_at_the_timeout_with_its_reason():
    srv = socket.socket()
    srv.bind((HOST, 0))
    srv.listen(0)                                     # a queue of one, filled: connects hang
    port = srv.getsockname()[1]
    filler = socket.create_connection((HOST, port), timeout=1)
    out = {}

    def follow():
        t0 = time.monotonic()
        try:
            rv.join(1, 2, HOST, port, 0.4)
        except Exception as e:
            out["err"], out["took"] = e, time.monotonic() - t0
    t = threading.Thread(target=follow, daemon=True)
    t.start()
    t.join(5)
    filler.close()
    srv.close()
    assert not t.is_alive() and isinstance(out["err"], JoinTimeout) and out["took"] < 3
    assert str(out["err"]).endswith("(last try: timed out)")


def test_a_refused_connect_is_retried_and_named_by_its_reason(monkeypatch):
    port = free_port()
    tries = connects(monkeypatch)
    with pytest.raises(JoinTimeout) as e:
        rv.join(1, 2, HOST, port, 0.5)
    assert 2 <= len(tries) <= 4                       # a try every 0.2 s: 0, 0.2, 0.4
    assert str(e.value).endswith("(last try: Connection refused)")


def test_a_follower_out_of_time_before_its_first_try_says_so():
    with pytest.raises(JoinTimeout) as e:
        rv.join(1, 2, HOST, free_port(), 0)
    assert str(e.value).endswith("(last try: none)")
