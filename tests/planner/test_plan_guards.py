"""The plan against an oracle that searches instead of dividing: over a grid of rooms,
contexts, stream counts, prompt caches and verify windows, on one rank and on uneven
ranks, every plan is the one the funding order gives (floor, a page a stream, the prompt
cache, the rest up to a window a stream), every number adds up on every rank, and every
refusal carries its numbers."""
from __future__ import annotations

import itertools

import pytest

from server.planner.layout import Layout, cdiv
from server.planner.plan import (AUTO_PAGED_CAP, AUTO_WINDOWS_FIT, NoStream, PlanError, Plan,
                                 RankPlan, TooManyStreams, plan)
from server.planner.units import size
from planner_cases import small


def lay(rank=0, n_kv=1, vocab=1, page_rows=4):
    return Layout(rank=rank, n_layers=1, n_kv=n_kv, head_dim=1, kv_bytes=4, page_rows=page_rows,
                  vocab=vocab, d_model=1, ff_rank=0, prefill_chunk=1)


def largest(pred, hi):
    """The largest x in 0..hi with pred(x), else None (a linear search: no division)."""
    best = None
    for x in range(hi + 1):
        if pred(x):
            best = x
    return best


def oracle_pages(Ls, rooms, context, parallel, cache_bytes, verify):
    pr = Ls[0].page_rows
    floor = cdiv(context + verify, pr)
    f = [L.fixed_bytes(context, True) for L in Ls]
    p = [L.page_bytes for L in Ls]
    ok = lambda n, pages: all(n * fb + pages * pb <= room for fb, pb, room in zip(f, p, rooms))
    if not ok(1, floor):
        return "nostream"
    fits = largest(lambda n: n >= 1 and ok(n, floor + n - 1), 80)
    if parallel:
        if parallel > fits:
            return ("toomany", fits)
        n = parallel
    else:
        half = largest(lambda n: all(2 * n * (fb + pb) <= room - floor * pb
                                     for fb, pb, room in zip(f, p, rooms)), 80) or 0
        n = max(1, min(AUTO_PAGED_CAP, half, fits))
    want = cache_bytes // max(p)
    cache = largest(lambda c: c <= want and ok(n, floor + n - 1 + c), want) or 0
    pages = largest(lambda x: x <= n * floor and ok(n, x + cache), n * floor)
    return n, pages, cache


def oracle_windows(Ls, rooms, context, parallel, cache_bytes, verify):
    f = [L.fixed_bytes(context, False) for L in Ls]
    w = [(context + verify - 1) * L.bytes_per_token for L in Ls]
    p = [L.page_bytes for L in Ls]
    ok = lambda n, c: all(n * (fb + wb) + c * pb <= room for fb, wb, pb, room in zip(f, w, p, rooms))
    if not ok(1, 0):
        return "nostream"
    fits = largest(lambda n: ok(n, 0), 80)
    want = cache_bytes // max(p)
    if parallel:
        if parallel > fits:
            return ("toomany", fits)
        n = parallel
    else:
        n = max(1, largest(lambda n: all(n * (fb + wb) <= room - want * pb
                                         for fb, wb, pb, room in zip(f, w, p, rooms)), 80) or 0)
    cache = largest(lambda c: c <= want and ok(n, c), want) or 0
    return n, 0, cache


CASES = list(itertools.product([0, 176, 257, 777], [1, 4, 15], [0, 2, 5], [0, 64, 500], [1, 3]))


@pytest.mark.parametrize("mode", ["on", "off"])
@pytest.mark.parametrize("ranks", ["one", "uneven"])
def test_every_plan_matches_the_funding_order(mode, ranks):
    if ranks == "one":
        Ls, scale = [lay()], [1]
    else:
        Ls, scale = [lay(0, n_kv=2, vocab=3), lay(1, n_kv=1)], [1, 1]
    oracle = oracle_pages if mode == "on" else oracle_windows
    seen = set()
    for room, context, parallel, cache_bytes, verify in CASES:
        rooms = [room * 2, room + 13][:len(Ls)] if ranks == "uneven" else [room]
        want = oracle(Ls, rooms, context, parallel, cache_bytes, verify)
        try:
            got = plan(Ls, rooms, context, parallel, cache_bytes, kv_pages=mode, verify_window=verify)
        except NoStream:
            assert want == "nostream", (rooms, context, parallel, cache_bytes, verify)
            seen.add("nostream")
            continue
        except TooManyStreams as e:
            assert want == ("toomany", e.fits) and e.asked == parallel
            seen.add("toomany")
            continue
        assert (got.streams, got.pages, got.cache_pages) == want, (rooms, context, parallel,
                                                                   cache_bytes, verify)
        assert all(type(x) is int for x in (got.streams, got.pages, got.cache_pages))   # counts, not 5.0
        seen.add("plan")
        check_adds_up(got, Ls, rooms, context, verify, cache_bytes)
    assert seen == {"nostream", "toomany", "plan"}


def check_adds_up(p: Plan, Ls, rooms, context, verify, cache_bytes):
    pr = Ls[0].page_rows
    assert p.mode == ("on" if p.paged else "off")
    assert p.floor_pages == cdiv(context + verify, pr) and p.page_rows == pr
    assert p.context == context and p.verify_window == verify and p.window_rows == context + verify - 1
    assert p.pool_pages == p.pages + p.cache_pages
    assert p.governing == min(range(len(rooms)), key=lambda i: (
        ((rooms[i] - p.streams * Ls[i].fixed_bytes(context, p.paged)) // Ls[i].page_bytes) if p.paged
        else (rooms[i] - p.streams * (Ls[i].fixed_bytes(context, False) + p.window_rows * Ls[i].bytes_per_token)) // Ls[i].page_bytes, i))
    for L, room, r in zip(Ls, rooms, p.ranks):
        assert isinstance(r, RankPlan) and r.rank == L.rank and r.room == room
        assert r.n_kv == L.n_kv and r.bytes_per_token == L.bytes_per_token
        assert r.page_bytes == L.page_bytes and r.fixed_bytes == L.fixed_bytes(context, p.paged)
        win = 0 if p.paged else p.window_rows * L.bytes_per_token
        assert r.window_bytes == win
        assert r.kv_bytes == (p.pages * L.page_bytes if p.paged else p.streams * win)
        assert r.prompt_cache_bytes == p.cache_pages * L.page_bytes
        assert r.fixed_total == p.streams * r.fixed_bytes
        assert r.used == r.kv_bytes + r.prompt_cache_bytes + r.fixed_total <= room
        assert r.spare == room - r.used >= 0
        assert r.as_dict() == {**{k: getattr(r, k) for k in r.__dataclass_fields__},
                               "used": r.used, "spare": r.spare}
    if p.paged:
        assert p.floor_pages + p.streams - 1 <= p.pages <= p.streams * p.floor_pages
    step = p.pool_step(poison=True)
    assert (step.paged, step.pages, step.page_rows, step.streams, step.context, step.poison) == (
        p.paged, p.pool_pages, pr, p.streams, p.window_rows, True)
    assert step.page_bytes == tuple(L.page_bytes for L in Ls) and p.pool_step().poison is False
    want = cache_bytes // max(L.page_bytes for L in Ls)
    trimmed = [n for n in p.notes if n.startswith("prompt cache trimmed")]
    assert bool(trimmed) == (p.cache_pages < want)
    if trimmed:
        assert trimmed[0] == (f"prompt cache trimmed from {size(cache_bytes)} to "
                              f"{size(p.cache_pages * max(L.page_bytes for L in Ls))} to keep the streams' pages")


def test_as_dict_names_every_number_and_the_ranks_when_they_differ():
    p = plan([small()], [400], context=15, parallel=2, prompt_cache_bytes=64, kv_pages="on")
    d = p.as_dict()
    g = p.rank
    assert d == dict(mode="on", pages=7, page_rows=4, page_bytes=32, bytes_per_token=8,
                     fixed_bytes=g.fixed_bytes, prompt_cache_bytes=64, cache_pages=2, pool_pages=9,
                     floor_pages=4, streams=2, context=15, verify_window=1, window_rows=15,
                     window_bytes=0, room_bytes=400, used_bytes=g.used, spare_bytes=g.spare, tp=1,
                     governing_rank=0, notes=[], snap_slots=0, snap_bytes=0)
    assert not p.shards_differ
    q = plan([lay(0), lay(1)], [400, 500], context=15, parallel=2, kv_pages="on")
    assert not q.shards_differ and [r["room"] for r in q.as_dict()["ranks"]] == [400, 500]
    assert q.as_dict()["governing_rank"] == 0 and q.rank is q.ranks[0]
    u = plan([lay(0, n_kv=2), lay(1)], [900, 900], context=15, parallel=2, kv_pages="on")
    assert u.shards_differ and len(u.as_dict()["ranks"]) == 2
    v = plan([lay(0, vocab=2), lay(1)], [900, 900], context=15, parallel=2, kv_pages="on")
    assert v.shards_differ                                   # fixed bytes differ
    assert "ranks" not in plan([lay(0), lay(1)], [900, 900], context=15, parallel=2,
                               kv_pages="on").as_dict()


def test_bad_inputs_each_say_what_to_change():
    cases = [
        (dict(layouts=[small(0), small(1)], rooms=[100], context=15),
         "1 rooms for 2 ranks: give one room per rank"),
        (dict(layouts=[], rooms=[], context=15), "0 rooms for 0 ranks: give one room per rank"),
        (dict(layouts=[small()], rooms=[100], context=0), "--context 0 must be at least 1"),
        (dict(layouts=[small()], rooms=[100], context=4, verify_window=0),
         "verify window 0 must be at least 1"),
        (dict(layouts=[small()], rooms=[100], context=4, parallel=-1),
         "--parallel -1 must be a positive number or auto"),
        (dict(layouts=[small()], rooms=[100], context=4, prompt_cache_bytes=-1),
         "--prompt-cache-gib must not be negative"),
        (dict(layouts=[small(0), small(1, page_rows=8)], rooms=[100, 100], context=4),
         "every rank must use the same --page-rows"),
    ]
    for kw, msg in cases:
        with pytest.raises(PlanError) as e:
            plan(**kw)
        assert str(e.value) == msg
    plan([small()], [10_000], context=1, verify_window=1, parallel=0)     # the edges pass


def test_refusals_carry_their_numbers():
    with pytest.raises(TooManyStreams) as e:
        plan([small()], [300], context=15, parallel=5, kv_pages="on")
    assert str(e.value) == ("--parallel 5 does not fit: at a 15-token context the room holds 2 "
                            "streams on pages (each 48 bytes fixed and a page beyond the 4-page "
                            "floor); lower --parallel or --context")
    assert (e.value.asked, e.value.fits) == (5, 2)
    with pytest.raises(TooManyStreams) as e:
        plan([small()], [500], context=15, parallel=4, kv_pages="off")
    assert str(e.value) == ("--parallel 4 does not fit: the room holds 3 whole windows of 15 rows; "
                            "lower --parallel or --context, or set TF_KV_PAGES=on to share pages")
    with pytest.raises(NoStream) as e:
        plan([small()], [100], context=15, parallel=1, kv_pages="off")
    assert str(e.value) == (
        "room 100 bytes on rank 0 is under the floor: one stream at a 15-token context needs "
        "152 bytes (a window of 15 rows x 8 bytes + 32 bytes fixed); the largest context that "
        "fits is 8 tokens. Lower --context, give the rank more room (a smaller --reserve-gib or a "
        "larger TF_ROOM_GIB; --room in foldserve plan) or spread the model over more ranks (--tp)")
    assert (e.value.rank, e.value.room, e.value.floor_bytes, e.value.largest_context) == (0, 100, 152, 8)
    with pytest.raises(NoStream) as e:
        plan([small()], [10], context=15, parallel=1, kv_pages="on")
    assert "; not even a 1-token context fits." in str(e.value) and e.value.largest_context == 0
    with pytest.raises(NoStream) as e:               # the rank that fits the least is named
        plan([small(0), small(1), small(2)], [150, 100, 120], context=15, parallel=1, kv_pages="on")
    assert e.value.rank == 1 and str(e.value).startswith("room 100 bytes on rank 1 ")
    with pytest.raises(NoStream) as e:
        plan([small(0), small(1)], [100, 100], context=15, parallel=1, kv_pages="on")
    assert e.value.rank == 0


def test_the_largest_context_is_exact_at_its_edge():
    # on pages need(c) = fixed(c) + ceil((c+1)/4) * 32; find rooms exactly at need(c)
    L = small()
    need = lambda c: L.fixed_bytes(c, True) + cdiv(c + 1, 4) * 32
    for c in range(1, 15):
        if need(c) >= need(15):
            continue
        with pytest.raises(NoStream) as e:
            plan([L], [need(c)], context=15, parallel=1, kv_pages="on")
        assert e.value.largest_context == max(x for x in range(1, 15) if need(x) <= need(c))
    plan([L], [need(15)], context=15, parallel=1, kv_pages="on")


def test_auto_modes_and_their_notes():
    p = plan([small()], [500], context=15, parallel=4, kv_pages="auto")
    assert p.mode == "on" and p.notes == (
        "TF_KV_PAGES=auto: pages, whole windows for the requested streams do not fit",)
    assert plan([small()], [500], context=15, parallel=3, kv_pages="auto").notes == ()
    # parallel auto asks whether AUTO_WINDOWS_FIT windows fit: 4 x 152 = 608
    assert plan([small()], [608], context=15, kv_pages="auto").mode == "off"
    assert plan([small()], [607], context=15, kv_pages="auto").mode == "on"
    assert AUTO_WINDOWS_FIT == 4 and AUTO_PAGED_CAP == 64
    # two ranks: every rank must fit its windows
    assert plan([small(0), small(1)], [608, 607], context=15, kv_pages="auto").mode == "on"
    p = plan([small(r) for r in range(3)], [10_000] * 3, context=15, parallel=1)
    assert p.notes == ("TF_KV_PAGES=auto: pages at 3 ranks",)
    assert plan([small()], [500], context=15, kv_pages="all").notes == (
        "TF_KV_PAGES=all is the same as on: every stream on pages",)


def test_auto_streams_on_pages_are_capped():
    big = plan([small()], [10**7], context=15, kv_pages="on")
    assert big.streams == AUTO_PAGED_CAP
    assert plan([small()], [176], context=15, kv_pages="on").streams == 1


def test_counts_are_ints_and_the_tightest_window_rank_governs():
    p = plan([small()], [10**6], context=15, kv_pages="on")
    assert all(type(x) is int for x in (p.streams, p.pages, p.cache_pages))
    w = plan([lay(0), lay(1)], [2000, 700], context=15, parallel=2, prompt_cache_bytes=64,
             kv_pages="off")
    assert w.governing == 1
    with pytest.raises(NoStream) as e:                   # pages: the floor named with verify
        plan([small()], [100], context=13, parallel=1, kv_pages="on", verify_window=3)
    assert "(4 pages of 4 rows x 32 bytes" in str(e.value)
    with pytest.raises(NoStream) as e:                   # context 2: only 1 token can fit
        plan([lay()], [lay().fixed_bytes(1, False) + 8], context=2, parallel=1, kv_pages="off")
    assert e.value.largest_context == 1
