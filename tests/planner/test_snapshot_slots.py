"""Snapshot slots in the prompt cache and admission (pure Python): ids lowest free first, the
least recently used snapshot dropped when none is free, a hit resumed at the deepest node
holding one, a node's slot freed with it, the grant's steps (RESTORE at the resumed rows,
PENDING), finish attaching the pending slot where its state stands, cancel giving it back,
and the integrity check catching a lost slot. A family without slots: no SnapStep at all."""
from __future__ import annotations

import pytest

from server.planner.admission import Admission
from server.planner.pool import Pool, PoolCorrupt
from server.planner.prompt_cache import PromptCache
from server.ranks.steps import BeginStep, SnapStep

PR = 4


def cache_of(slots=2, budget=8, pages=16):
    pool = Pool(pages)
    return pool, PromptCache(pool, PR, budget, slots)


def kept(pool, cache, ids):
    """Keep ids' full pages as a stream would at its end; returns its table."""
    t = pool.take(-(-len(ids) // PR))
    cache.insert(tuple(ids), t)
    pool.give(t)
    return t


def test_slots_lowest_first_and_the_lru_snapshot_dropped():
    pool, c = cache_of(slots=2)
    a, b = list(range(1, 13)), list(range(50, 62))
    kept(pool, c, a)
    kept(pool, c, b)
    s0, s1 = c.take_slot(), c.take_slot()
    assert (s0, s1) == (0, 1)
    assert c.attach(a, 2, s0) and c.attach(b, 3, s1)
    assert c.lookup_snap(a + [9])[1] == s0          # a's snapshot touched: b's is the oldest
    assert c.take_slot() == s1 and c.slots_kept == (s0,)
    assert c.lookup_snap(b + [9]) == ((), -1)       # b's pages stay, no snapshot: no resume
    assert len(c) == 6
    c.check()


def test_a_hit_resumes_at_the_deepest_snapshot_and_attach_once():
    pool, c = cache_of(slots=3)
    ids = list(range(1, 17))                        # 4 full pages
    t = kept(pool, c, ids)
    assert c.lookup_snap(ids + [0]) == ((), -1)
    assert c.attach(ids, 2, c.take_slot())
    assert c.lookup_snap(ids + [0]) == (t[:2], 0)
    s = c.take_slot()
    assert c.attach(ids, 3, s)
    assert c.lookup_snap(ids + [0]) == (t[:3], s)
    assert c.lookup_snap(ids[:12]) == (t[:2], 0)    # a token left to prefill: page 3 not used
    again = c.take_slot()
    assert not c.attach(ids, 3, again)              # one snapshot a node: given back
    assert again in c.slots_free
    assert not c.attach(ids + [5] * 8, 6, c.take_slot())   # no such node kept
    with pytest.raises(AssertionError, match="given back twice"):
        c.give_slot(again)
    c.check()


def test_evicting_a_node_frees_its_slot():
    pool, c = cache_of(slots=1)
    ids = list(range(1, 9))
    kept(pool, c, ids)
    assert c.attach(ids, 2, c.take_slot())
    c.evict_until_free(pool.total)
    assert len(c) == 0 and c.slots_free == (0,) and pool.free == pool.total
    c.check()


def test_grants_restore_and_name_a_pending_slot():
    adm = Admission(paged=True, pages=32, page_rows=PR, streams=2, context=64, cache_pages=16,
                    snap_slots=3)
    turn1 = tuple(range(1, 12))                     # 11 tokens
    adm.request("a", turn1, 6)
    (g,) = adm.admit_ready()
    assert g.steps() == [BeginStep(g.stream, g.page_ids, 0),
                         SnapStep(SnapStep.PENDING, 0, g.stream)]
    written = turn1 + (90, 91, 92, 93, 94)          # 16 rows: the pending state stands at 12
    adm.finish("a", written)
    assert adm.cache.slots_kept == (0,)
    adm.request("b", written + (95, 96), 4)
    (g,) = adm.admit_ready()
    assert (g.kept, g.resumed_rows, g.restore, g.pending) == (3, 12, 0, 1)
    assert g.steps()[1:] == [SnapStep(SnapStep.RESTORE, 0, g.stream, 12),
                             SnapStep(SnapStep.PENDING, 1, g.stream)]
    adm.check_integrity()
    adm.cancel("b")                                 # its pending slot back, nothing kept
    assert adm.cache.slots_free == (1, 2)
    adm.check_integrity()
    adm.cache._free_slots.remove(1)                 # a slot lost: caught
    with pytest.raises(PoolCorrupt, match="snapshot slots out of order"):
        adm.check_integrity()


def test_keep_prompt_copies_the_pending_state():
    adm = Admission(paged=False, pages=8, page_rows=PR, streams=2, context=64, cache_pages=8,
                    snap_slots=3)
    prompt = tuple(range(1, 17))
    adm.request("c-0", prompt, 4)
    (g,) = adm.admit_ready()
    steps = adm.keep_prompt("c-0", prompt)
    assert steps[-1] == SnapStep(SnapStep.COPY, g.pending, to=1)
    adm.request("c-1", prompt, 4)
    (g1,) = adm.admit_ready()
    assert (g1.resumed_rows, g1.restore, g1.copy_from) == (12, 1, tuple(range(3)))
    adm.check_integrity()


def test_no_slots_no_snapshot_steps():
    adm = Admission(paged=True, pages=32, page_rows=PR, streams=2, context=64, cache_pages=16)
    ids = tuple(range(1, 17))
    adm.request("a", ids, 4)
    (g,) = adm.admit_ready()
    assert g.steps() == [BeginStep(g.stream, g.page_ids, 0)] and g.pending == -1
    adm.finish("a", ids + (5, 6, 7))
    adm.request("b", ids + (5, 6, 7, 8), 4)
    (g,) = adm.admit_ready()
    assert g.resumed_rows == 16 and g.restore == -1 and len(g.steps()) == 1
