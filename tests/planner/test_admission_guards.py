"""Admission guards: every refusal's words and numbers, the ticket, the grant, the steps,
and check_integrity finding every table / stream corruption."""
from __future__ import annotations

import pytest

from server.planner.admission import Admission, Grant, Refused, Ticket
from server.planner.plan import plan
from server.planner.pool import PoolCorrupt
from server.ranks.steps import BeginStep, CopyStep, EndStep
from planner_cases import small


def paged(pages=8, streams=2, context=20, cache=0, verify=1, poison=False):
    return Admission(paged=True, pages=pages, page_rows=4, streams=streams, context=context,
                     cache_pages=cache, verify_window=verify, poison=poison)


def windows(streams=2, context=20, cache=4):
    return Admission(paged=False, pages=cache, page_rows=4, streams=streams, context=context,
                     cache_pages=cache)


def test_refusals_in_openais_words_with_the_numbers():
    adm = paged(pages=3, context=20, verify=2)
    cases = [
        ((0, 4), "invalid_prompt", "The prompt has no tokens", {}),
        ((3, 0), "invalid_max_tokens", "max_tokens is 0; it must be at least 1", {"max_tokens": 0}),
        ((3, -2), "invalid_max_tokens", "max_tokens is -2; it must be at least 1", {"max_tokens": -2}),
        ((15, 6), "context_length_exceeded",
         "This server's maximum context length is 20 tokens; the prompt has 15 tokens and "
         "max_tokens asks for 6", {"context": 20, "prompt_tokens": 15, "max_tokens": 6}),
        ((5, 6), "pool_too_small",
         "The request needs 4 pages of 4 rows (prompt 5 + max_tokens 6 + verify 2) but the pool "
         "holds 3; lower max_tokens", {"pages": 4, "pool": 3}),
    ]
    for (m, k), code, msg, numbers in cases:
        with pytest.raises(Refused) as e:
            adm.check(m, k)
        assert (e.value.code, e.value.message, str(e.value), e.value.numbers) == (code, msg, msg, numbers)
    assert adm.check(1, 1) == 1 and adm.check(2, 2) == 2
    assert adm.check(4, 6) == 3                          # 4 + 6 + 2 = 12 rows: exactly 3 pages
    assert windows().check(15, 5) == 0                   # windows take no pages


def test_a_ticket_says_its_place_and_a_request_twice_is_refused():
    adm = paged(streams=1)
    t = adm.request("a", [1, 2, 3], 4)
    assert t == Ticket("a", 3, 4, 2, 0)
    assert adm.request("b", [1], 2).position == 1 and adm.request("c", [1], 2).position == 2
    with pytest.raises(ValueError, match=r"^request 'a' is already admitted or waiting$"):
        adm.request("a", [1], 1)
    adm.admit_ready()
    with pytest.raises(ValueError, match="already admitted"):
        adm.request("a", [1], 1)
    assert adm.running == 1 and adm.waiting == 2
    assert adm.table("a") == (0, 1) and adm.stream_of("a") == 0
    assert adm.pages_for(3, 4) == 2 and adm.pages_for(4, 4) == 3


def test_grants_steps_and_fresh_pages():
    g = Grant("r", 2, (5, 1, 7), 1, 4)
    assert g.fresh == (1, 7) and g.steps() == [BeginStep(2, (5, 1, 7), 1)] and g.copy_from == ()
    w = Grant("r", 1, (), 0, 8, (3, 4))
    assert w.steps() == [BeginStep(1, (), 0), CopyStep(1, (3, 4), 8, to_pages=False)]


def test_streams_are_reused_lowest_first():
    adm = paged(streams=3, pages=12)
    for r in "abc":
        adm.request(r, [1], 1)
    assert [g.stream for g in adm.admit_ready()] == [0, 1, 2]
    adm.finish("b", [1])
    adm.cancel("a")
    adm.request("d", [1], 1)
    adm.request("e", [1], 1)
    assert [(g.req_id, g.stream) for g in adm.admit_ready()] == [("d", 0), ("e", 1)]
    adm.check_integrity()


def test_finish_keeps_full_pages_and_a_resume_shares_them():
    adm = paged(pages=10, cache=4)
    adm.request("a", list(range(9)), 3)                   # 13 rows: 4 pages
    [g] = adm.admit_ready()
    assert adm.finish("a", list(range(11))) == [EndStep(0)]
    assert adm.pool.kept == 2 and adm.pool.free == 8
    adm.request("b", list(range(10)), 2)
    [h] = adm.admit_ready()
    assert h.page_ids[:2] == g.page_ids[:2] and h.kept == 2 and h.resumed_rows == 8
    assert h.fresh == h.page_ids[2:] and len(h.page_ids) == 4
    assert adm.pool.refs(g.page_ids[0]) == 1
    adm.cancel("b")                                       # nothing more kept from a cancel
    assert adm.pool.kept == 2
    adm.check_integrity()


def test_a_head_that_cannot_get_pages_gives_its_prefix_back():
    adm = paged(pages=5, cache=4, streams=3)
    adm.request("a", list(range(9)), 3)                   # 4 pages
    adm.admit_ready()
    adm.finish("a", list(range(9)))                        # 2 kept
    adm.request("x", [7] * 3, 1)                          # 2 pages (of the 3 free)
    adm.admit_ready()
    adm.request("b", list(range(9)) + [5] * 3, 3)         # 16 rows: 4 pages, 2 from the prefix
    assert adm.admit_ready() == []                        # 2 fresh needed, 1 free, the prefix is held
    assert adm.pool.refs(adm.cache.pages[0]) == 0 and adm.pool.kept == 2
    adm.check_integrity()
    adm.finish("x", [7] * 3)
    [g] = adm.admit_ready()
    assert g.kept == 2
    adm.check_integrity()


def test_eviction_makes_room_for_the_head():
    adm = paged(pages=4, cache=4)
    adm.request("a", list(range(8)), 1)                   # 3 pages
    adm.admit_ready()
    adm.finish("a", list(range(9)))                        # 2 kept
    adm.request("b", [9] * 8, 4)                          # 4 pages: every kept one is evicted
    [g] = adm.admit_ready()
    assert g.kept == 0 and len(g.page_ids) == 4 and adm.pool.kept == 0 and len(adm.cache) == 0
    adm.check_integrity()


def test_windows_finish_copies_into_the_cache_and_resume_copies_back():
    adm = windows(cache=4)
    adm.request("a", list(range(9)), 3)
    [g] = adm.admit_ready()
    assert g.page_ids == () and g.steps() == [BeginStep(0, (), 0)]
    steps = adm.finish("a", list(range(11)))
    assert steps[0].to_pages and steps[0].rows == 8 and steps[0].stream == 0 and steps[1] == EndStep(0)
    assert adm.finish.__doc__
    adm.request("b", list(range(10)), 2)
    [h] = adm.admit_ready()
    assert h.resumed_rows == 8 and h.copy_from == steps[0].page_ids and h.kept == 0
    assert h.steps()[1] == CopyStep(0, steps[0].page_ids, 8, to_pages=False)
    assert adm.finish("b", [1, 2]) == [EndStep(0)]       # nothing new to keep: no copy
    assert adm.cancel("nobody") == []
    adm.check_integrity()


def test_poison_names_fresh_pages_of_a_resume_only():
    adm = paged(pages=10, cache=4, poison=True)
    adm.request("a", list(range(9)), 3)
    [g] = adm.admit_ready()
    assert adm.pool.pop_fresh() == g.page_ids
    adm.finish("a", list(range(11)))
    adm.request("b", list(range(10)), 2)
    [h] = adm.admit_ready()
    assert adm.pool.pop_fresh() == h.fresh and h.kept == 2


def test_from_plan_takes_every_number():
    p = plan([small()], [400], context=15, parallel=2, prompt_cache_bytes=64, kv_pages="on",
             verify_window=2)
    adm = Admission.from_plan(p, poison=True)
    assert (adm.paged, adm.pool.total, adm.page_rows, adm.streams, adm.context, adm.cache.budget,
            adm.verify_window, adm.pool.poison) == (True, p.pool_pages, 4, 2, 15, p.cache_pages, 2, True)
    assert Admission.from_plan(p).pool.poison is False


@pytest.mark.parametrize("corrupt, msg", [
    (lambda a: a.pool._refs.__setitem__(0, 2), None),
    (lambda a: setattr(a._running["a"], "table", (0,)), "page 1: 1 refs, 0 tables hold it"),
    (lambda a: a._streams.append(0), "streams out of order: [0, 0, 1]"),
    (lambda a: a._streams.clear(), "streams out of order: [0]"),
])
def test_check_integrity_finds_each_corruption(corrupt, msg):
    adm = paged()
    adm.request("a", [1, 2, 3], 4)
    adm.admit_ready()
    adm.check_integrity()
    corrupt(adm)
    with pytest.raises(PoolCorrupt) as e:
        adm.check_integrity()
    if msg:
        assert str(e.value) == msg


def test_defaults_and_pages_shared_by_two_running_tables():
    assert paged().pool.poison is False
    adm = Admission(paged=True, pages=12, page_rows=4, streams=3, context=40, cache_pages=4)
    assert adm.pool.poison is False and adm.verify_window == 1
    adm.request("a", list(range(9)), 3)
    adm.admit_ready()
    adm.finish("a", list(range(11)))
    adm.request("b", list(range(10)), 2)
    adm.request("c", list(range(10)), 2)
    b, c = adm.admit_ready()
    assert b.page_ids[:2] == c.page_ids[:2] and adm.pool.refs(b.page_ids[0]) == 2
    adm.check_integrity()
