"""bench/drafts_profile.py's arithmetic: the wall ratio split into the forward's ratio and the
outside-forward factor, the staircase over the one-row rounds, and --staircase's junk drafts."""
from __future__ import annotations

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
import drafts_profile as P  # noqa: E402


def _run(tokens, wall_s, forward_ms):
    return {"decode_tps": (tokens - 1) / wall_s, "wall_s": wall_s,
            "stages_ms": {"forward": forward_ms}}


def test_the_split_multiplies_back_to_the_wall_ratio():
    plain, drafted = _run(400, 3.6, 3500.0), _run(400, 2.2, 2000.0)
    sp = P.split(plain, drafted)
    assert sp["forward_ratio"] == 1.75
    assert math.isclose(sp["outside_share_plain"], 1 - 3500 / 3600, abs_tol=1e-4)
    assert math.isclose(sp["outside_share_drafted"], 1 - 2000 / 2200, abs_tol=1e-4)
    assert math.isclose(sp["forward_ratio"] * sp["outside_factor"], sp["wall_ratio"],
                        rel_tol=1e-3)
    assert math.isclose(sp["wall_ratio"], 3.6 / 2.2, rel_tol=1e-3)


def test_the_staircase_is_each_size_over_the_one_row_rounds():
    by = {1: {"median": 10.0}, 2: {"median": 12.0}, 4: {"median": 17.5}}
    assert P.staircase(by) == (1.0, 1.2, None, 1.75)


def test_junk_drafts_cycle_through_every_size_within_the_cap():
    j = P.Junk(3)
    got = [len(j.propose([], 8)) for _ in range(8)]
    assert got == [0, 1, 2, 3, 0, 1, 2, 3]
    assert j.propose([], 1) == ()                  # k = 0 in turn
    assert j.propose([], 1) == (0,)                # k = 2 in turn, cut to the 1 allowed
    assert j.expect(3) == 1.0
