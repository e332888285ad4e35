"""Exact page ids on a pool of 4 pages."""
import pytest

from server.planner.pool import Pool, PoolCorrupt, PoolExhausted


def counts(p):
    return p.free, p.held, p.kept


def test_lowest_free_id_first():
    p = Pool(4)
    assert p.take(2) == (0, 1)
    assert p.take(1) == (2,)
    p.give((0,))
    assert p.take(2) == (0, 3)
    assert counts(p) == (0, 4, 0)
    p.check_integrity()


def test_take_past_the_free_pages_raises_and_changes_nothing():
    p = Pool(4)
    p.take(3)
    with pytest.raises(PoolExhausted, match=r"take\(2\) with 1 of 4 pages free"):
        p.take(2)
    assert counts(p) == (1, 3, 0)


def test_shared_pages_free_at_the_last_give():
    p = Pool(4)
    a = p.take(2)                    # (0, 1)
    p.keep(0)
    p.give(a)                        # 0 kept, 1 free
    assert counts(p) == (3, 0, 1)
    p.share((0,))                    # a resumed stream holds 0
    p.share((0,))                    # and another
    assert counts(p) == (3, 1, 0) and p.refs(0) == 2
    p.give((0,))
    p.release(0)                     # the cache lets go; one stream still holds it
    assert counts(p) == (3, 1, 0)
    p.give((0,))
    assert counts(p) == (4, 0, 0)
    assert p.take(4) == (0, 1, 2, 3)
    p.check_integrity()


def test_giving_a_page_twice_is_caught():
    p = Pool(4)
    p.take(1)
    p.give((0,))
    with pytest.raises(PoolCorrupt, match="page 0, which no stream holds"):
        p.give((0,))
    with pytest.raises(PoolCorrupt, match="share of free page 1"):
        p.share((1,))


def test_poison_records_fresh_pages_only():
    p = Pool(4, poison=True)
    p.take(2)
    assert p.pop_fresh() == (0, 1)
    assert p.pop_fresh() == ()
    p.keep(0)
    p.give((0,))
    p.share((0,))                    # a kept prefix is written already: not fresh
    assert p.take(1) == (2,)
    assert p.pop_fresh() == (2,)
    p.take_kept(1)                   # cache pages are copied into whole: not fresh
    assert p.pop_fresh() == ()
    p.check_integrity()


def test_without_poison_nothing_is_recorded():
    p = Pool(4)
    p.take(2)
    assert p.pop_fresh() == ()
