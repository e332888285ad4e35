"""Host-link frames: lists survive the trip, and ranks out of step are caught, not misread."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, strategies as st

from rank_procs import HOST, free_port
from server.ranks import wire
from server.ranks.comm import HostComm
from server.ranks.rank_errors import RankLost, RankMismatch
from server.ranks.rendezvous import join


@given(st.lists(st.binary(max_size=64), max_size=8))
def test_gathered_lists_round_trip(items):
    assert wire.unpack_list(wire.pack_list(items)) == items


def _pair(port):
    links = {}
    t = threading.Thread(target=lambda: links.setdefault(1, join(1, 2, HOST, port, 5.0)))
    t.start()
    links[0] = join(0, 2, HOST, port, 5.0)
    t.join(5)
    return HostComm(links[0], timeout_s=5), HostComm(links[1], timeout_s=5)


def test_ranks_out_of_step_are_named():
    lead, follower = _pair(free_port())
    errors = {}

    def follower_side():
        try:
            follower.all_reduce(np.zeros(2, np.float32))
        except Exception as e:
            errors[1] = e
    t = threading.Thread(target=follower_side)
    t.start()
    with pytest.raises(RankMismatch) as e:
        lead.all_gather_bytes(b"x")
    t.join(5)
    assert str(e.value) == ("rank 1 is at all_reduce while rank 0 is at all_gather; "
                            "the ranks fell out of step")
    # rank 0 told rank 1 why; rank 1 stops instead of waiting for a sum
    assert isinstance(errors[1], RankLost) and errors[1].rank == 0
    # a broken comm stays broken: the next call raises at once
    with pytest.raises(RankMismatch):
        lead.barrier()
    lead.close()
    follower.close()


def test_a_step_word_outside_int32_is_refused_before_sending():
    lead, follower = _pair(free_port())
    with pytest.raises(OverflowError):
        lead.broadcast_step([2**31])
    lead.close()
    follower.close()
