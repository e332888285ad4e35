"""Exact plans on small layouts (8 bytes a token, pages of 4 rows = 32 bytes, fixed 48 on pages)."""
import pytest

from server.shapes.spec import shape
from server.planner.layout import layouts
from server.planner.plan import NoStream, PlanError, TooManyStreams, plan
from server.planner.units import GIB
from server.ranks.steps import PoolStep
from planner_cases import small


def test_floor_then_a_page_each():
    # context 15 + verify 1 = 16 rows = 4 pages floor; 2 streams: 2*48 + (4+1)*32 = 256
    p = plan([small()], [256], context=15, parallel=2, kv_pages="on")
    assert (p.mode, p.floor_pages, p.pages, p.streams, p.cache_pages) == ("on", 4, 5, 2, 0)
    assert p.rank.spare == 0


def test_pages_stop_at_a_window_each():
    p = plan([small()], [400], context=15, parallel=2, kv_pages="on")
    assert p.pages == 8                              # 2 x 4, though 9 would fit
    assert p.rank.spare == 400 - 96 - 8 * 32


def test_prompt_cache_comes_before_the_rest():
    p = plan([small()], [400], context=15, parallel=2, prompt_cache_bytes=64, kv_pages="on")
    assert (p.pages, p.cache_pages, p.pool_pages) == (7, 2, 9)
    assert p.pool_step() == PoolStep(paged=True, pages=9, page_rows=4, page_bytes=(32,), streams=2,
                                     context=15, poison=False)


def test_prompt_cache_is_trimmed_with_a_note():
    p = plan([small()], [256], context=15, parallel=2, prompt_cache_bytes=320, kv_pages="on")
    assert (p.pages, p.cache_pages) == (5, 0)
    assert p.notes == ("prompt cache trimmed from 320 bytes to 0 bytes to keep the streams' pages",)


def test_under_the_floor_is_no_stream_with_the_numbers():
    with pytest.raises(NoStream) as e:
        plan([small()], [100], context=15, parallel=1, kv_pages="on")
    assert str(e.value) == (
        "room 100 bytes on rank 0 is under the floor: one stream at a 15-token context needs "
        "176 bytes (4 pages of 4 rows x 32 bytes + 48 bytes fixed); the largest context that "
        "fits is 4 tokens. Lower --context, give the rank more room (a smaller --reserve-gib or a "
        "larger TF_ROOM_GIB; --room in foldserve plan) or spread the model over more ranks (--tp)")
    assert (e.value.room, e.value.floor_bytes, e.value.largest_context) == (100, 176, 4)


def test_too_many_streams_says_how_many_fit():
    with pytest.raises(TooManyStreams, match=r"--parallel 5 does not fit: .* holds 2 streams on pages"):
        plan([small()], [300], context=15, parallel=5, kv_pages="on")


def test_windows_take_whole_windows():
    # window 15 rows x 8 = 120, fixed 32: 152 a stream
    p = plan([small()], [500], context=15, parallel=0, kv_pages="off")
    assert (p.mode, p.streams, p.pages, p.cache_pages, p.window_rows) == ("off", 3, 0, 0, 15)
    assert p.pool_step().paged is False


def test_windows_auto_funds_the_prompt_cache_first():
    p = plan([small()], [500], context=15, parallel=0, prompt_cache_bytes=64, kv_pages="off")
    assert (p.streams, p.cache_pages) == (2, 2)
    assert p.pool_step().pages == 2


def test_auto_mode_picks_pages_when_windows_do_not_fit():
    assert plan([small()], [500], context=15, parallel=3, kv_pages="auto").mode == "off"
    p = plan([small()], [500], context=15, parallel=4, kv_pages="auto")
    assert p.mode == "on" and p.notes[0].startswith("TF_KV_PAGES=auto: pages")


def test_auto_mode_at_three_ranks_is_pages():
    p = plan([small(r) for r in range(3)], [10_000] * 3, context=15, parallel=1, kv_pages="auto")
    assert p.mode == "on"


def test_the_smallest_room_governs_at_tp3():
    ranks = layouts(shape("llama3-8b"), 3, kv_bytes=2, page_rows=16)
    rooms = [3 * GIB, 2 * GIB, 4 * GIB]
    p = plan(ranks, rooms, context=8192, parallel=4, kv_pages="on")
    assert p.governing == 1
    for r in p.ranks:
        assert r.used <= r.room
    # rank 1 is full up to less than one page and its fixed parts
    g = p.rank
    assert g.spare < g.page_bytes or p.pages == p.streams * p.floor_pages
    assert p.pool_step().page_bytes == (786432, 786432, 524288)
    d = p.as_dict()
    assert d["room_bytes"] == 2 * GIB and len(d["ranks"]) == 3


def test_uneven_shards_the_page_count_is_bound_by_the_tightest_rank():
    ranks = [small(0, n_kv=2), small(1, n_kv=1)]              # page bytes 64 and 32
    p = plan(ranks, [2000, 2000], context=15, parallel=2, kv_pages="on")
    # rank 0: (2000 - 96) // 64 = 29 pages; capped at 2 x 4
    assert p.governing == 0 and p.pages == 8
    assert [r.kv_bytes for r in p.ranks] == [512, 256]


def test_bad_inputs_name_the_fix():
    with pytest.raises(PlanError, match="1 rooms for 2 ranks"):
        plan([small(0), small(1)], [100], context=15)
    with pytest.raises(PlanError, match="--context 0"):
        plan([small()], [100], context=0)
