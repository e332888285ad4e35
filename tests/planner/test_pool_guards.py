"""Pool and prompt cache guards: every misuse is refused by name, every corruption is found
by check_integrity / check, and the counts free + held + kept == total hold at each step."""
from __future__ import annotations

import pytest

from server.planner.pool import Pool, PoolCorrupt, PoolExhausted
from server.planner.prompt_cache import Node, PromptCache, page_key


def counts(p):
    return p.free, p.held, p.kept


def test_counts_through_every_state():
    p = Pool(6)
    assert counts(p) == (6, 0, 0) and p.total == 6
    a = p.take(3)
    assert a == (0, 1, 2) and counts(p) == (3, 3, 0) and [p.refs(i) for i in a] == [1, 1, 1]
    p.keep(1)
    assert p.is_kept(1) and not p.is_kept(0) and counts(p) == (3, 3, 0)
    p.give(a)
    assert counts(p) == (5, 0, 1) and p.refs(1) == 0
    p.share((1,))
    assert counts(p) == (5, 1, 0) and p.refs(1) == 1
    p.share((1,))
    assert p.refs(1) == 2 and counts(p) == (5, 1, 0)
    p.give((1,))
    p.give((1,))
    assert counts(p) == (5, 0, 1)
    p.release(1)
    assert counts(p) == (6, 0, 0) and p.is_kept(1) is False
    assert p.take(6) == (0, 1, 2, 3, 4, 5)
    p.check_integrity()


def test_misuse_is_refused_by_name():
    with pytest.raises(ValueError, match=r"^pool of -1 pages$"):
        Pool(-1)
    assert Pool(0).take(0) == ()
    p = Pool(3)
    with pytest.raises(ValueError, match=r"^take\(-1\)$"):
        p.take(-1)
    with pytest.raises(PoolExhausted, match=r"^take\(4\) with 3 of 3 pages free$"):
        p.take(4)
    assert p.take(3) == (0, 1, 2)
    with pytest.raises(PoolExhausted, match=r"^take\(1\) with 0 of 3 pages free$"):
        p.take(1)
    p.give((1,))
    with pytest.raises(PoolCorrupt, match=r"^share of free page 1$"):
        p.share((1,))
    with pytest.raises(PoolCorrupt, match=r"^give of page 1, which no stream holds$"):
        p.give((1,))
    with pytest.raises(PoolCorrupt, match=r"^keep of page 1, which no stream holds$"):
        p.keep(1)
    p.keep(0)
    with pytest.raises(PoolCorrupt, match=r"^page 0 is kept twice$"):
        p.keep(0)
    with pytest.raises(PoolCorrupt, match=r"^release of page 2, which the cache does not keep$"):
        p.release(2)
    p.release(0)                                    # a stream still holds it: not free
    assert p.refs(0) == 1 and p.free == 1 and not p.is_kept(0)
    p.check_integrity()


def test_take_kept_goes_straight_into_the_cache_and_is_never_fresh():
    p = Pool(5, poison=True)
    assert p.take(1) == (0,)
    ids = p.take_kept(2)
    assert ids == (1, 2) and counts(p) == (2, 1, 2) and [p.refs(i) for i in ids] == [0, 0]
    assert p.pop_fresh() == (0,) and p.pop_fresh() == ()
    assert p.take_kept(0) == () and p.pop_fresh() == ()
    p.release(1)
    assert p.free == 3 and p.kept == 1
    p.check_integrity()
    q = Pool(3)
    assert q.take_kept(2) == (0, 1) and q.pop_fresh() == () and q.kept == 2


@pytest.mark.parametrize("corrupt, msg", [
    (lambda p: p._free.append(p._free[0]), "a page is on the free list twice"),
    (lambda p: p._refs.__setitem__(4, 1), "page 4 is free and in use"),
    (lambda p: p._kept.__setitem__(4, True), "page 4 is free and in use"),
    (lambda p: setattr(p, "_n_kept_only", 2), "kept count 2, pages kept 1"),
    (lambda p: p._free.remove(5), "free 2 + held 2 + kept 1 != total 6"),
    (lambda p: p._refs.__setitem__(1, 0), "free 3 + held 1 + kept 1 != total 6"),
])
def test_check_integrity_finds_each_corruption(corrupt, msg):
    p = Pool(6)
    p.take(3)
    p.keep(2)
    p.give((2,))
    p.check_integrity()
    assert counts(p) == (3, 2, 1)
    corrupt(p)
    with pytest.raises(PoolCorrupt) as e:
        p.check_integrity()
    assert str(e.value) == msg


# -- prompt cache ----------------------------------------------------------------------

def cache(pages=16, budget=4, pr=2):
    pool = Pool(pages)
    return pool, PromptCache(pool, pr, budget)


def keep(pool, c, ids):
    table = pool.take(-(-len(ids) // c.page_rows))
    added = c.insert(ids, table)
    pool.give(table)
    return table, added


def test_page_key_chains_sha256_over_little_endian_ids():
    import hashlib
    import struct
    assert page_key(b"", (1, 2)) == hashlib.sha256(struct.pack("<2I", 1, 2)).digest()
    k = page_key(b"", (1, 2))
    assert page_key(k, (3,)) == hashlib.sha256(k + b"\x03\x00\x00\x00").digest()
    assert page_key(b"", (1, 2)) != page_key(b"", (2, 1))


def test_insert_lookup_and_the_lru_order():
    pool, c = cache(budget=3)
    t, added = keep(pool, c, [1, 2, 3, 4, 5])            # 2 full pages kept
    assert added == 2 and len(c) == 2 and c.pages == (t[1], t[0]) and pool.kept == 2   # root last
    assert c.lookup([1, 2, 3, 4, 5]) == t[:2]
    assert c.lookup([1, 2, 3, 4]) == t[:1]                # a token is left to prefill
    assert c.lookup([1, 2, 9]) == t[:1] and c.lookup([9]) == () and c.lookup([]) == ()
    t2, added = keep(pool, c, [1, 2, 3, 4, 7, 8])         # shares 2 pages, adds 1
    assert added == 1 and len(c) == 3 and pool.kept == 3
    assert c.lookup([1, 2, 3, 4, 7, 8, 0]) == (t[0], t[1], t2[2])
    c.check()
    keep(pool, c, [5, 6])                                 # over budget: LRU leaf goes
    assert len(c) == 3 and c.lookup([5, 6, 0]) != ()
    c.check()
    pool.check_integrity()


def test_insert_stops_at_a_page_kept_under_another_prefix_and_at_a_collision(monkeypatch):
    pool, c = cache(budget=8)
    t = pool.take(2)
    c.insert([1, 2, 3, 4], t)
    assert c.insert([9, 9, 3, 4], t) == 0                 # its first page is kept elsewhere
    pool.give(t)
    monkeypatch.setattr("server.planner.prompt_cache.page_key", lambda prev, ids: b"k" + prev[:1])
    pool2, c2 = cache(budget=8)
    u = pool2.take(2)
    assert c2.insert([1, 2, 3, 4], u) == 2
    v = pool2.take(2)
    assert c2.insert([5, 6, 7, 8], v) == 0                # same keys, other ids: never joined
    assert c2.lookup([5, 6, 7, 8, 0]) == ()
    assert c2.lookup([1, 2, 3, 4, 0]) == u


def test_zero_budget_and_short_ids():
    pool, c = cache(budget=0)
    t = pool.take(2)
    assert c.insert([1, 2, 3, 4], t) == 0 and c.lookup([1, 2, 3, 4, 5]) == ()
    assert c.insert_copy([1, 2, 3, 4]) == ((), 0) and len(c) == 0 and pool.kept == 0
    pool, c = cache(budget=4)
    t = pool.take(3)
    assert c.insert([1, 2, 3, 4, 5, 6], t[:2]) == 2       # only as many pages as the table
    assert c.insert([7], t) == 0


def test_eviction_takes_leaves_and_spares_held_and_protected_pages():
    pool, c = cache(budget=8, pages=8)
    a, _ = keep(pool, c, [1, 2, 3, 4, 5, 6])              # chain of 3
    b, _ = keep(pool, c, [7, 8])                          # another root
    assert pool.free == 8 - 4 and pool.kept == 4
    c.lookup([1, 2, 3, 4, 5, 6, 0])                       # a's chain is most recent
    c.evict_until_free(5)
    assert pool.free == 5 and c.lookup([7, 8, 0]) == ()   # b went first (least recent)
    pool.share(a[2:3])                                     # a stream holds a's leaf
    c.evict_until_free(8)
    assert pool.free == 5 and len(c) == 3                  # a held leaf: nothing evictable above it
    pool.give(a[2:3])
    c.evict_until_free(8)
    assert pool.free == 8 and len(c) == 0 and pool.kept == 0
    c.check()
    pool.check_integrity()


def test_insert_copy_names_kept_pages_minus_one_and_respects_budget_and_pool():
    pool, c = cache(budget=3, pages=10)
    pages, rows = c.insert_copy([1, 2, 3, 4, 5])
    assert len(pages) == 2 and rows == 4 and all(p >= 0 for p in pages) and pool.kept == 2
    again = c.insert_copy([1, 2, 3, 4, 5, 6, 7, 8])
    assert len(c) == 3 and pool.kept == 3                 # budget 3: only one new page
    assert again == ((-1, -1, again[0][2]), 6)
    assert c.insert_copy([1, 2, 3, 4]) == ((), 0)         # all kept already: no copy
    pool2, c2 = cache(budget=8, pages=1)
    assert c2.insert_copy([1, 2, 3, 4]) == ((0,), 2)      # the pool had one page
    c2.check()


def test_insert_copy_evicts_other_prefixes_for_its_own():
    pool, c = cache(budget=2, pages=10)
    c.insert_copy([9, 9, 8, 8])
    pages, rows = c.insert_copy([1, 2, 3, 4])
    assert rows == 4 and len(pages) == 2 and len(c) == 2
    assert c.lookup([9, 9, 8, 8, 0]) == () and c.lookup([1, 2, 3, 4, 0]) == pages
    c.check()
    pool.check_integrity()


@pytest.mark.parametrize("corrupt, msg", [
    (lambda c, pool: pool.release(c.pages[0]), r"cached page \d+ is not kept"),
    (lambda c, pool: c._nodes.pop(next(reversed(c._nodes))), "a node without its parent"),
    (lambda c, pool: setattr(next(iter(c._nodes.values())), "children", 5), "children count is off"),
    (lambda c, pool: setattr(list(c._nodes.values())[1], "page", c.pages[0]), "a page is cached twice"),
    (lambda c, pool: setattr(c, "budget", 1), "cache past its budget"),
])
def test_check_finds_each_corruption(corrupt, msg):
    pool, c = cache(budget=4)
    keep(pool, c, [1, 2, 3, 4])
    c.check()
    corrupt(c, pool)
    with pytest.raises(AssertionError, match=f"^{msg}$"):
        c.check()


def test_check_allows_a_zero_budget_with_nodes():
    pool, c = cache(budget=4)
    keep(pool, c, [1, 2])
    c.budget = 0
    c.check()


def test_eviction_looks_past_a_held_leaf_and_its_parent():
    pool, c = cache(budget=8, pages=8)
    a, _ = keep(pool, c, [1, 2, 3, 4])                    # a2 (leaf), a1 (root): least recent
    b, _ = keep(pool, c, [7, 8])
    assert c.pages == (a[1], a[0], b[0])
    pool.share(a[1:2])                                    # a stream holds a's leaf
    free = pool.free
    c.evict_until_free(free + 1)
    assert pool.free == free + 1 and c.pages == (a[1], a[0])   # b went, past a2 and a1
    pool.give(a[1:2])
    c.check()
    pool.check_integrity()


def test_insert_copy_at_a_budget_of_one_and_exactly_at_the_budget():
    pool, c = cache(budget=1, pages=10)
    assert c.insert_copy([1, 2, 3, 4]) == ((0,), 2) and len(c) == 1
    pool, c = cache(budget=3, pages=10)
    c.insert_copy([9, 9, 8, 8])                           # 2 nodes
    pages, rows = c.insert_copy([5, 5])                   # 2 + 1 == budget: nothing evicted
    assert rows == 2 and len(c) == 3 and c.lookup([9, 9, 8, 8, 0]) != ()


def test_insert_copy_extends_a_long_kept_prefix_from_its_last_node():
    pool, c = cache(budget=8, pages=10)
    first, _ = c.insert_copy([1, 2, 3, 4, 5, 6])          # 3 pages
    pages, rows = c.insert_copy([1, 2, 3, 4, 5, 6, 7, 8])
    assert pages[:3] == (-1, -1, -1) and rows == 8
    assert c.lookup([1, 2, 3, 4, 5, 6, 7, 8, 0]) == first + pages[3:]
    c.check()


def test_a_node_counts_every_child():
    pool, c = cache(budget=8)
    keep(pool, c, [1, 2, 3, 4])
    keep(pool, c, [1, 2, 5, 6])                           # the root now has two children
    root = c._nodes[page_key(b"", (1, 2))]
    assert root.children == 2
    c.check()


def test_insert_never_grows_a_prefix_past_a_collision(monkeypatch):
    monkeypatch.setattr("server.planner.prompt_cache.page_key", lambda prev, ids: prev + b"x")
    pool, c = cache(budget=8)
    c.insert([1, 2, 3, 4], pool.take(2))                  # keys x, xx
    t = pool.take(3)
    assert c.insert([5, 6, 7, 8, 9, 10], t) == 0          # x collides: nothing under it
    assert len(c) == 2 and not any(pool.is_kept(p) for p in t)


def test_trim_evicts_held_pages_too():
    pool, c = cache(budget=1)
    t = pool.take(2)                                      # the stream still holds both
    assert c.insert([1, 2, 3, 4], t) == 2
    assert len(c) == 1 and c.pages == (t[0],) and not pool.is_kept(t[1])


def test_a_budget_of_one_page_is_looked_up():
    pool, c = cache(budget=1)
    t, _ = keep(pool, c, [1, 2, 3])
    assert c.lookup([1, 2, 3]) == t[:1]
