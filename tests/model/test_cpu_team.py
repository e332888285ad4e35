"""forward_cpu.Team: the threads beside the caller that run a round's other members. A team is
shared by every model of its kinds in a process, so two callers' rounds must not take each
other's replies (a stand-in member: plain Python, so no numba needed)."""
from __future__ import annotations

import threading
import time

import numpy as np


def _member(m, n, ctr, done, slow0):
    time.sleep(slow0 if m == 0 else 0.1)
    done.append(m)


def test_two_callers_rounds_on_one_team_each_get_their_own_members():
    from kernels.forward_cpu import Team
    team = Team(_member)
    a, b = [], []
    got = {}

    def call(name, done, slow0):
        team.run(2, (np.zeros((2, 16), np.int64), done, slow0))
        got[name] = sorted(done)                  # what had run when run() returned

    # a's member 1 is queued first; a's member 0 is slow, so b waits on the replies first
    ta = threading.Thread(target=call, args=("a", a, 0.4))
    tb = threading.Thread(target=call, args=("b", b, 0.0))
    ta.start()
    time.sleep(0.05)
    tb.start()
    ta.join(5)
    tb.join(5)
    assert got == {"a": [0, 1], "b": [0, 1]}


def test_a_failed_member_sets_the_abort_row_and_is_raised():
    from kernels.forward_cpu import Team

    def member(m, n, ctr):
        if m == 1:
            raise RuntimeError("member 1 failed")

    ctr = np.zeros((3, 16), np.int64)
    team = Team(member)
    try:
        team.run(2, (ctr,))
    except RuntimeError as e:
        assert "member 1" in str(e)
    else:
        raise AssertionError("the member's error was not raised")
    assert ctr[-1, 0] == 1
