"""The pace (server/drafts/pace.py): a stream drafts as far as pays by its own record, and
stops spending rows where its drafts miss (probing now and then)."""
from __future__ import annotations

from server.drafts.pace import PROBE, Paced


class Always:
    """A source proposing k tokens whenever asked; counts the asks."""

    def __init__(self):
        self.asked = []

    def propose(self, out, k):
        self.asked.append(k)
        return tuple(range(k))

    def verified(self, proposed, accepted):
        pass


def test_drafts_taken_draft_further_and_drafts_missed_stop():
    good = Paced(Always(), row_cost=0.45)
    assert len(good.propose([], 8)) == 1            # a new stream: a = 0.5, one token pays
    for _ in range(12):
        d = good.propose([], 8)
        good.verified(len(d), len(d))               # every draft taken
    assert good.rate > 0.9 and good.best(8) >= 4

    bad = Paced(Always(), row_cost=0.45)
    for _ in range(6):
        d = bad.propose([], 8)
        if d:
            bad.verified(len(d), 0)
    assert bad.best(8) == 0 and bad.propose([], 8) == ()
    tries = [len(bad.propose([], 8)) for _ in range(PROBE)]
    assert tries.count(1) == 1 and tries.count(0) == PROBE - 1   # one probe per PROBE rounds


def test_free_rows_draft_the_cap_and_costly_rows_need_a_high_rate():
    p = Paced(Always(), row_cost=0.0)
    assert p.best(8) == 8
    p = Paced(Always(), row_cost=0.45)
    p.taken, p.tried = 0.3, 1.0
    assert p.best(8) == 0                           # 1.3 tokens for 1.45 rounds: no
    p.taken, p.tried = 0.9, 1.0
    assert 3 <= p.best(8) <= 5                      # 1.46x at k = 3..4
