"""The prompt cache on 4 pages of 4 rows, driven directly."""
import server.planner.prompt_cache as pc
from server.planner.pool import Pool
from server.planner.prompt_cache import PromptCache

IDS = tuple(range(100, 111))          # 11 tokens: pages [100..103] [104..107], 3 left over


def kept_stream(cache, pool, ids, n_pages):
    table = pool.take(n_pages)
    cache.insert(ids, table)
    pool.give(table)
    return table


def test_full_pages_only_are_kept():
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    kept_stream(cache, pool, IDS, 3)                          # pages 0, 1, 2
    assert sorted(cache.pages) == [0, 1] and (pool.free, pool.kept) == (2, 2)
    pool.check_integrity(); cache.check()


def test_lookup_leaves_a_token_to_prefill():
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    kept_stream(cache, pool, IDS, 3)
    assert cache.lookup(IDS[:8]) == (0,)          # 8 tokens: the 2nd page would leave none
    assert cache.lookup(IDS[:9]) == (0, 1)
    assert cache.lookup(IDS[:4] + (7, 7, 7, 7, 7)) == (0,)
    assert cache.lookup((1,) + IDS[1:]) == ()


def test_a_hash_collision_never_joins_two_prompts(monkeypatch):
    monkeypatch.setattr(pc, "page_key", lambda prev, ids: b"same")
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    kept_stream(cache, pool, IDS, 3)
    assert cache.pages == (0,)                    # page 2's key collided with page 1's: not kept
    assert cache.lookup((9, 9, 9, 9, 9)) == ()    # same key, other ids: a miss
    cache.check()


def test_a_hash_collision_stops_a_window_copy_as_it_stops_a_kept_stream(monkeypatch):
    monkeypatch.setattr(pc, "page_key", lambda prev, ids: b"same")
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    # windows: page 2's key collides with page 1's, so only page 1 is copied (as insert keeps it)
    assert cache.insert_copy(IDS) == ((0,), 4)
    assert cache.pages == (0,) and pool.kept == 1 and pool.free == 3
    other = (9, 9, 9, 9, 9)                       # its first page has the same key, other ids
    assert cache.insert_copy(other) == ((), 0)    # nothing overwritten, nothing taken
    assert cache.lookup(IDS) == (0,) and cache.lookup(other) == ()
    assert pool.kept == 1 and pool.free == 3
    pool.check_integrity(); cache.check()


def test_budget_evicts_least_recently_used_leaf_first():
    pool = Pool(8)
    cache = PromptCache(pool, 4, budget_pages=3)
    a = tuple(range(9))
    b = (50, 51, 52, 53, 54)
    kept_stream(cache, pool, a, 3)                # keeps 0, 1
    kept_stream(cache, pool, b, 2)                # takes (2, 3), keeps 2 (the lowest free id)
    assert sorted(cache.pages) == [0, 1, 2]
    cache.lookup(a)                               # a is the most recent now
    c = (60, 61, 62, 63, 64)
    kept_stream(cache, pool, c, 2)                # over budget: b's page goes
    assert cache.lookup(b) == () and cache.lookup(a) == (0, 1)
    pool.check_integrity(); cache.check()


def test_evict_until_free_skips_held_pages():
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    kept_stream(cache, pool, IDS, 3)              # kept 0, 1; free 2, 3
    pool.share((0, 1))                            # a resumed stream holds them
    cache.evict_until_free(4)
    assert pool.free == 2 and sorted(cache.pages) == [0, 1]
    pool.give((0, 1))
    cache.evict_until_free(3)                     # the leaf (page 1) goes first
    assert cache.pages == (0,) and pool.free == 3
    pool.check_integrity(); cache.check()


def test_windows_copy_into_cache_pages_and_reuse_the_kept_prefix():
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=4)
    assert cache.insert_copy(IDS) == ((0, 1), 8)
    longer = IDS + (111, 112, 113, 114, 115)      # 16 tokens: 4 full pages
    assert cache.insert_copy(longer) == ((-1, -1, 2, 3), 16)   # 0, 1 kept already: not copied
    assert cache.insert_copy(longer) == ((), 0)                  # all kept: no copy at all
    assert cache.lookup(longer) == (0, 1, 2)
    assert pool.kept == 4 and pool.free == 0
    pool.check_integrity(); cache.check()


def test_zero_budget_keeps_nothing():
    pool = Pool(4)
    cache = PromptCache(pool, 4, budget_pages=0)
    kept_stream(cache, pool, IDS, 3)
    assert pool.free == 4 and cache.lookup(IDS) == ()
