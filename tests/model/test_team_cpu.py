"""kernels/team_cpu.py's piece counters: every piece of a region is handed out exactly once,
however its member (from the front) and the others (from the back) interleave their takes,
and -1 once all are taken; across threads too."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from kernels import qmatmul

ok, why = qmatmul.available()
pytestmark = pytest.mark.skipif(not ok, reason=why)


@settings(max_examples=60, deadline=None)
@given(per=st.integers(1, 12), r=st.integers(0, 3), order=st.lists(st.booleans(), max_size=40))
def test_each_piece_of_a_region_is_taken_once_from_either_end(per, r, order):
    from kernels.team_cpu import WIDTH, region_piece
    ctr = np.zeros((3, WIDTH), np.int64)
    got, fronts, backs = [], [], []
    for back in order + [False] * per:          # then the front takes whatever is left
        p = region_piece(ctr, 1, r, per, back)
        if p >= 0:
            got.append(p)
            (backs if back else fronts).append(p)
    assert sorted(got) == list(range(r * per, (r + 1) * per))
    assert fronts == sorted(fronts) and backs == sorted(backs, reverse=True)
    assert region_piece(ctr, 1, r, per, False) == -1 and region_piece(ctr, 1, r, per, True) == -1
    assert not ctr[0].any() and not ctr[2].any()          # other stages' counters untouched


def test_two_threads_taking_from_both_ends_share_the_pieces_exactly():
    from kernels.team_cpu import WIDTH, region_piece
    per = 20000
    for _ in range(3):
        ctr = np.zeros((2, WIDTH), np.int64)
        taken = [[], []]

        def take_all(k):
            p = region_piece(ctr, 0, 1, per, k == 1)
            while p >= 0:
                taken[k].append(p)
                p = region_piece(ctr, 0, 1, per, k == 1)
        ts = [threading.Thread(target=take_all, args=(k,)) for k in (0, 1)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(taken[0] + taken[1]) == list(range(per, 2 * per))
