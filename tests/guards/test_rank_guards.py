"""The same page ids on every rank: a follower maps exactly the ids rank 0's admission
named, in the same order, through the same steps; it never takes a page of its own.

Two engines of one dummy model (rank 0 and rank 1 of TP=2) apply the steps rank 0's
admission produced, rank 1 through follow() and the packed words, as on the wire."""
from __future__ import annotations

import pytest

from server.engine.build import open_model
from server.planner.admission import Admission
from server.ranks import steps
from server.ranks.follower import follow


class WireComm:
    """Rank 1's comm: broadcast_step hands out rank 0's packed steps, in order."""
    rank = 1

    def __init__(self, words):
        self.words, self.failures = list(words), []

    def broadcast_step(self, words):
        assert words is None
        return self.words.pop(0)

    def report_failure(self, detail):
        self.failures.append(detail)


def rank0_script():
    """A run whose tables are not in id order: a kept prefix is shared, pages come back
    between admissions, and a resumed stream's fresh pages lie below its kept ones."""
    adm = Admission(paged=True, pages=24, page_rows=4, streams=3, context=40, cache_pages=8)
    out = []

    def emit(xs):
        out.extend(xs)

    a = list(range(100, 113))                   # 13 tokens: 3 full pages kept at the end
    adm.request("b", [7] * 5, 4)                # pages 0..2
    adm.request("a", a, 4)                      # pages 3..7
    emit(s for g in adm.admit_ready() for s in g.steps())
    emit(adm.finish("b", [7] * 3))              # b's pages (lower ids) go back, none kept
    emit(adm.finish("a", a + [1, 2, 3]))        # a's first 4 pages are kept
    adm.request("c", a + [9, 9], 4)             # resumes a's prefix, fresh pages below it
    adm.request("d", [5, 5, 5], 8)
    emit(s for g in adm.admit_ready() for s in g.steps())
    emit(adm.cancel("d"))
    adm.request("e", [6] * 7, 2)
    emit(s for g in adm.admit_ready() for s in g.steps())
    adm.check_integrity()
    return out


@pytest.fixture(scope="module")
def engines():
    e = [open_model("dummy:tiny", tp=2, rank=r, progress=False).engine for r in (0, 1)]
    return e


def test_a_follower_maps_the_ids_rank_0_names(engines):
    e0, e1 = engines
    script = rank0_script()
    begins = [s for s in script if isinstance(s, steps.BeginStep)]
    assert any(list(b.page_ids) != sorted(b.page_ids) for b in begins), "tables all sorted"
    pool = steps.PoolStep(True, 24, 4, (e0.page_bytes(4), e1.page_bytes(4)), 3, 40)
    full = [pool, *script, steps.StopStep()]
    for s in full:
        e0.apply(s)
    comm = WireComm([steps.pack(s) for s in full])
    assert follow(comm, e1) == steps.StopStep()
    assert comm.failures == [] and comm.words == []
    assert e1.tables == e0.tables
    open_tables = {b.stream: b.page_ids for b in begins}
    for st, ids in e1.tables.items():
        assert ids == open_tables[st]
    assert e1.tables_mapped == e0.tables_mapped == len(begins)
    assert e1.table_digest.hexdigest() == e0.table_digest.hexdigest()


def test_tables_are_the_begin_steps_ids_exactly(engines):
    _, e1 = engines
    e1.apply(steps.PoolStep(True, 16, 4, (e1.page_bytes(4),) * 2, 2, 20))
    e1.apply(steps.BeginStep(0, (9, 2, 14), 1))
    e1.apply(steps.BeginStep(1, (3,)))
    e1.apply(steps.EndStep(0))
    e1.apply(steps.BeginStep(0, (15, 0, 1, 8)))
    assert e1.tables == {0: (15, 0, 1, 8), 1: (3,)}
