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


def test_a_busy_round_drafts_only_what_pays_at_its_rate():
    """Beside other decodes a drafted row must pay at the round's rate (pace.best's load):
    a stream that drafts 4 alone drafts less beside 4 decodes and nothing beside 15, unless
    its drafts are nearly sure; with free rows the load changes nothing."""
    p = Paced(Always(), row_cost=0.45)
    p.taken, p.tried = 0.85, 1.0
    alone, beside4, beside16 = p.best(8), p.best(8, (5, 5.0)), p.best(8, (16, 16.0))
    assert alone >= 3 and 0 < beside4 < alone and beside16 == 0, (alone, beside4, beside16)
    assert p.propose([], 8, (16, 16.0)) == ()
    p.taken, p.tried = 0.99, 1.0                    # nearly sure: still pays among 16
    assert p.best(8, (16, 16.0)) > 0
    free = Paced(Always(), row_cost=0.0)
    assert free.best(8, (16, 16.0)) == 8


def test_the_policy_counts_the_drafts_already_placed():
    """policy.round_drafts hands each stream the round's rows and expected tokens so far
    (decodes first, then each earlier stream's drafts): four equal streams alone in a round
    draft less than one stream alone, the cap and the rows budget still hold."""
    from server.drafts.policy import round_drafts

    def stream():
        p = Paced(Always(), row_cost=0.45)
        p.taken, p.tried = 0.9, 1.0
        return p
    (solo,) = round_drafts([(stream(), [], 100)], 8, 9, False)
    four = round_drafts([(stream(), [], 100) for _ in range(4)], 8, 9, False)
    assert len(solo) >= 3
    assert all(len(d) < len(solo) for d in four) and sum(map(len, four)) <= 9 - 4
    assert round_drafts([(stream(), [], 100) for _ in range(9)], 8, 9, False) == [()] * 9
    assert round_drafts([(stream(), [], 100)], 8, 9, True) == [()]       # a prefill round


def test_the_cpu_row_cost_falls_as_the_stream_grows():
    """A verify chunk's rows share their key reads, a one-row round's keys are its own: on
    the CPU a row costs less of a round the more keys the stream has (policy.cpu_row_cost),
    and the pace, told the stream's length (`at`), drafts further on a long stream."""
    from server.drafts.policy import ROW_COST, cpu_row_cost
    assert ROW_COST["cpu"] is cpu_row_cost
    assert cpu_row_cost(0) > cpu_row_cost(300) > cpu_row_cost(1000) > cpu_row_cost(2000) > 0
    p = Paced(Always(), cpu_row_cost)
    p.taken, p.tried = 0.7, 1.0
    p.at(40)
    short = p.best(8)
    p.at(1500)
    assert p.best(8) > short, (short, p.best(8))
    fixed = Paced(Always(), 0.45)
    fixed.at(1500)
    assert fixed.row_cost == 0.45


class Classed:
    """A source whose proposals carry a match length (as the n-gram source's): `plan` says
    each round's match; asked k, it proposes k tokens."""

    def __init__(self, plan):
        self.plan, self.match = list(plan), 0

    def propose(self, out, k):
        self.match = self.plan.pop(0)
        return tuple(range(k))

    def verified(self, proposed, accepted):
        pass


def test_long_matches_and_chance_matches_keep_their_own_records():
    """A stream whose copied stretches (long matches) are always taken and whose chance
    2-gram matches always miss: the pace drafts the whole cap on a long match and nothing
    on a short one (one record a class, pace.LONG), where one record for both would draft
    the same length for either."""
    from server.drafts.pace import LONG
    long_, short = LONG + 6, 2
    p = Paced(Classed([long_, short] * 20 + [long_, short]), row_cost=0.2)
    for _ in range(20):
        d = p.propose([], 8)
        p.verified(len(d), len(d))                  # the long match's drafts: all taken
        d = p.propose([], 8)
        if d:
            p.verified(len(d), 0)                   # the chance match's: none
    assert len(p.propose([], 8)) == 8
    assert p.propose([], 8) == ()


def test_short_matches_and_copied_stretches_keep_their_own_records():
    """Past a chance match, a short agreement (LONG .. MID - 1 tokens) and a copied stretch
    (MID and past) keep their own records too: a stream whose copied stretches are always
    taken and whose short matches always miss drafts the cap on the first and nothing on
    the second, where one record for both would draft the same length for either."""
    from server.drafts.pace import LONG, MID
    copied, short = MID + 4, LONG
    p = Paced(Classed([copied, short] * 20 + [copied, short]), row_cost=0.2)
    for _ in range(20):
        d = p.propose([], 8)
        p.verified(len(d), len(d))                  # the copied stretch's drafts: all taken
        d = p.propose([], 8)
        if d:
            p.verified(len(d), 0)                   # the short match's: none
    assert len(p.propose([], 8)) == 8
    assert p.propose([], 8) == ()


def test_a_lone_chunk_is_priced_by_the_measured_staircase():
    """Where the stream's rows are the round, the pace prices k drafts by chunk_cost[k] (the
    kernels' tiles: one pass up to 6 rows, two past it), so it drafts up to the last row a
    pass holds; beside other rows (or without a table) the linear row cost stands."""
    stair = (1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 3.0, 3.1, 3.2)
    p = Paced(Always(), row_cost=0.45, chunk_cost=stair)
    q = Paced(Always(), row_cost=0.45)
    for x in (p, q):
        x.taken, x.tried = 0.9, 1.0
    assert p.best(8) == 5                           # 6 rows: the last one-pass chunk
    assert q.best(8) != 5 and q.best(8) == p.best(8, (2, 2.0))


def test_the_ngram_match_counts_how_far_back_the_occurrence_agrees():
    """NgramDrafts.match: the chosen occurrence's agreement with the text's end, its n-gram
    extended back token by token up to MATCH_CAP (a copied line: long; a chance n-gram
    whose tokens before differ: its n)."""
    from server.drafts.ngram import MATCH_CAP, NgramDrafts
    line = [10, 11, 12, 13, 14, 15, 16, 17, 18, 19]
    d = NgramDrafts([1, 2] + line + [3, 4] + [7, 8] + line[:7])
    assert d.propose([], 3) == (17, 18, 19) and d.match == 7       # 2 != 8 before the line
    d = NgramDrafts([7, 8] + line + [3, 4] + [7, 8] + line[:7])
    assert d.propose([], 3) == (17, 18, 19) and d.match == 9       # 7, 8 agree too
    d = NgramDrafts([1, 15, 16, 30, 31] + [2, 15, 16])
    assert d.propose([], 2) == (30, 31) and d.match == 2           # a chance 2-gram
    run = list(range(100, 100 + MATCH_CAP + 5))
    d = NgramDrafts(run + [0] + run[:-2])
    assert d.propose([], 2) == tuple(run[-2:]) and d.match == MATCH_CAP
    d.propose([run[-2]], 1)
    assert d.match == MATCH_CAP                 # the reply goes on along the same line
