"""Rendezvous: the ranks find each other, and a missing one is named within the timeout."""
from __future__ import annotations

import threading
import time

import pytest

from rank_procs import HOST, free_port, run
from server.config import ConfigError
from server.ranks.rank_errors import JoinError, JoinTimeout, RankMismatch
from server.ranks.rendezvous import from_env_or_args, join, parse_master


def join_only(rank, world, port, timeout_s):
    join(rank, world, HOST, port, timeout_s).close()


def test_missing_rank_is_named_on_every_rank_that_came():
    # world 3, rank 2 never starts
    port = free_port()
    res = run(join_only, 3, 2.0, ranks=[0, 1], deadline_s=20, port=port)
    assert res.left_behind == []
    lead, mid = res.outcomes[0], res.outcomes[1]
    assert lead.error == "JoinTimeout"
    assert lead.message == (f"rank 0: waiting for rank 2 of 3 (2 s); "
                            f"is it started, and can it reach 127.0.0.1:{port}?")
    assert lead.seconds < 6
    assert (mid.error, mid.message, mid.exitcode) == ("JoinError", lead.message, 1)


def test_follower_that_cannot_reach_rank_0_says_so():
    port = free_port()
    t0 = time.monotonic()
    with pytest.raises(JoinTimeout) as e:
        join(1, 2, HOST, port, 1.0)
    assert time.monotonic() - t0 < 3
    assert str(e.value).startswith(f"rank 1: waiting for rank 0 at 127.0.0.1:{port} (1 s); "
                                   f"is it started, and can this host reach 127.0.0.1:{port}?")


def test_several_missing_ranks_are_all_named():
    with pytest.raises(JoinTimeout) as e:
        join(0, 3, HOST, free_port(), 0.5)
    assert "waiting for ranks 1 and 2 of 3 (0.5 s); are they started, and can they reach" in str(e.value)


def _join_in_threads(specs, port, timeout_s=5.0):
    """specs: [(rank, world)]; returns {index: Link or exception}."""
    out = {}

    def one(i, rank, world):
        try:
            out[i] = join(rank, world, HOST, port, timeout_s)
        except Exception as e:
            out[i] = e
    threads = [threading.Thread(target=one, args=(i, r, w)) for i, (r, w) in enumerate(specs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    for v in out.values():
        if hasattr(v, "close"):
            v.close()
    return out


def test_ranks_with_different_tp_sizes_both_stop():
    out = _join_in_threads([(0, 2), (1, 3)], free_port())
    msg = "ranks disagree on TP size: rank 0 has 2, rank 1 has 3; start every rank with the same --tp"
    assert isinstance(out[0], RankMismatch) and str(out[0]) == msg
    assert isinstance(out[1], JoinError) and str(out[1]) == msg


def test_the_same_rank_twice_stops_the_join():
    out = _join_in_threads([(0, 3), (1, 3), (1, 3)], free_port())
    assert isinstance(out[0], RankMismatch)
    assert str(out[0]) == "rank 0: rank 1 joined twice; give each process its own --rank"
    assert all(isinstance(out[i], JoinError) for i in (1, 2))


def test_a_stray_connection_does_not_break_the_join():
    import socket
    port = free_port()
    out = {}
    t = threading.Thread(target=lambda: out.setdefault(0, join(0, 2, HOST, port, 5.0)))
    t.start()
    time.sleep(0.2)
    socket.create_connection((HOST, port)).close()          # a port scanner, say
    link = join(1, 2, HOST, port, 5.0)
    t.join(5)
    assert list(out[0].peers) == [1] and link.hub is not None
    link.close()
    out[0].close()


def test_port_in_use_is_explained():
    import socket
    with socket.socket() as s:
        s.bind((HOST, 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(JoinError, match=rf"rank 0: cannot listen on 127.0.0.1:{port}: .*"):
            join(0, 2, HOST, port, 1.0)


# -- flags and torchrun's variables ----------------------------------------------------

def test_flags_alone():
    assert from_env_or_args(1, 3, "10.0.0.1:29551", {}) == (1, 3, "10.0.0.1", 29551)
    assert from_env_or_args(None, None, None, {}) == (0, 1, "127.0.0.1", 29551)


def test_torchrun_variables_alone():
    env = {"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert from_env_or_args(None, None, None, env) == (2, 3, "10.0.0.1", 29500)


def test_flags_and_variables_that_agree_or_not():
    env = {"RANK": "2", "WORLD_SIZE": "3", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"}
    assert from_env_or_args(2, 3, "10.0.0.1:29500", env) == (2, 3, "10.0.0.1", 29500)
    with pytest.raises(ConfigError, match=r"^--rank 1 and RANK=2 disagree; give one of them$"):
        from_env_or_args(1, 3, None, env)
    with pytest.raises(ConfigError, match="--master port 29551 and MASTER_PORT=29500 disagree"):
        from_env_or_args(None, None, "10.0.0.1:29551", env)


def test_bad_values_are_refused():
    with pytest.raises(ConfigError, match=r"rank 3 is outside 0..2 for TP size 3"):
        from_env_or_args(3, 3, None, {})
    with pytest.raises(ConfigError, match="RANK='x' is not a whole number"):
        from_env_or_args(None, None, None, {"RANK": "x"})
    with pytest.raises(ConfigError, match="port 70000 is outside"):
        parse_master("h:70000")


def test_master_forms():
    assert parse_master("[::1]:29600") == ("::1", 29600)
    assert parse_master("gb10-a") == ("gb10-a", 29551)
