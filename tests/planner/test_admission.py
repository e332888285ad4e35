"""Admission on 4 pages of 4 rows: exact grants, FIFO waits, refusals, resumes."""
import pytest

from server.planner.admission import Admission, Refused
from server.planner.plan import plan
from server.ranks.steps import BeginStep, CopyStep, EndStep
from planner_cases import small


def paged(pages=4, streams=2, context=11, cache=0, poison=False):
    return Admission(paged=True, pages=pages, page_rows=4, streams=streams, context=context,
                     cache_pages=cache, poison=poison)


def test_a_request_takes_prompt_reply_and_verify_pages():
    adm = paged()
    adm.request("a", [1, 2, 3], max_tokens=4)           # 3 + 4 + 1 = 8 rows: 2 pages
    [g] = adm.admit_ready()
    assert (g.stream, g.page_ids, g.kept, g.resumed_rows) == (0, (0, 1), 0, 0)
    assert g.steps() == [BeginStep(0, (0, 1), 0)]
    assert adm.finish("a", [1, 2, 3, 9, 9, 9]) == [EndStep(0)]
    assert adm.pool.free == 4
    adm.check_integrity()


def test_fifo_the_head_blocks_the_short_ones_behind_it():
    adm = paged(streams=3)
    adm.request("a", [1] * 3, 4)                         # 2 pages
    adm.request("b", [2] * 6, 5)                         # 3 pages: waits
    adm.request("c", [3], 1)                             # 1 page would fit, but b is first
    assert [g.req_id for g in adm.admit_ready()] == ["a"]
    assert adm.admit_ready() == [] and adm.waiting == 2
    adm.finish("a", [1] * 3)
    grants = adm.admit_ready()
    assert [(g.req_id, g.stream, g.page_ids) for g in grants] == [("b", 0, (0, 1, 2)), ("c", 1, (3,))]
    adm.check_integrity()


def test_past_the_streams_a_request_waits_with_nothing_allocated():
    adm = paged(pages=4, streams=1)
    adm.request("a", [1], 1)
    adm.request("b", [2], 1)
    assert [g.req_id for g in adm.admit_ready()] == ["a"]
    assert adm.pool.free == 3
    assert adm.cancel("a") == [EndStep(0)]
    [g] = adm.admit_ready()
    assert (g.req_id, g.stream, g.page_ids) == ("b", 0, (0,))


def test_cancel_a_waiting_request_sends_nothing():
    adm = paged(streams=1)
    adm.request("a", [1], 1)
    adm.request("b", [2], 1)
    adm.admit_ready()
    assert adm.cancel("b") == [] and adm.waiting == 0
    assert adm.cancel("nobody") == []
    adm.check_integrity()


def test_past_the_context_is_refused_with_openais_words():
    adm = paged(context=11)
    with pytest.raises(Refused) as e:
        adm.request("a", [1] * 8, max_tokens=4)
    assert e.value.code == "context_length_exceeded"
    assert e.value.message == ("This server's maximum context length is 11 tokens; "
                               "the prompt has 8 tokens and max_tokens asks for 4")
    assert adm.waiting == 0


def test_more_than_the_pool_is_refused_at_once():
    adm = paged(pages=2, context=11)
    with pytest.raises(Refused, match="needs 3 pages of 4 rows .* the pool holds 2") as e:
        adm.request("a", [1] * 8, max_tokens=3)
    assert e.value.code == "pool_too_small" and e.value.numbers == {"pages": 3, "pool": 2}


def test_empty_prompt_and_zero_max_tokens_are_refused():
    adm = paged()
    with pytest.raises(Refused, match="no tokens"):
        adm.request("a", [], 1)
    with pytest.raises(Refused, match="max_tokens is 0"):
        adm.request("a", [1], 0)


def test_resume_shares_the_kept_prefix_pages():
    adm = paged(pages=4, context=15, cache=2)
    prompt = list(range(10, 19))                          # 9 tokens
    adm.request("a", prompt, 2)                           # 9 + 2 + 1 = 12 rows: 3 pages
    [g] = adm.admit_ready()
    assert g.page_ids == (0, 1, 2)
    adm.finish("a", prompt + [77])                        # 10 rows written: pages 0, 1 full
    assert (adm.pool.free, adm.pool.kept) == (2, 2)
    adm.request("b", prompt + [77, 5], 2)                 # 11 + 2 + 1 = 14 rows: 4 pages
    [g] = adm.admit_ready()
    assert (g.page_ids, g.kept, g.resumed_rows, g.fresh) == ((0, 1, 2, 3), 2, 8, (2, 3))
    assert g.steps() == [BeginStep(0, (0, 1, 2, 3), 2)]
    adm.check_integrity()


def test_kept_prefixes_are_evicted_before_admission_waits():
    adm = paged(pages=4, context=15, cache=2)
    adm.request("a", list(range(9)), 2)
    adm.admit_ready()
    adm.finish("a", list(range(9)))                       # keeps 0, 1
    adm.request("b", [50] * 10, 5)                        # 16 rows: all 4 pages
    [g] = adm.admit_ready()
    assert g.page_ids == (0, 1, 2, 3) and g.kept == 0 and len(adm.cache) == 0
    adm.check_integrity()


def test_poison_names_the_fresh_pages_only():
    adm = paged(pages=4, context=15, cache=2, poison=True)
    prompt = list(range(9))
    adm.request("a", prompt, 2)
    adm.admit_ready()
    assert adm.pool.pop_fresh() == (0, 1, 2)
    adm.finish("a", prompt)
    adm.request("b", prompt, 2)
    [g] = adm.admit_ready()
    assert g.fresh == (2,) and adm.pool.pop_fresh() == (2,)


def test_windows_resume_by_copying_cache_pages():
    adm = Admission(paged=False, pages=2, page_rows=4, streams=2, context=15, cache_pages=2)
    prompt = list(range(9))
    adm.request("a", prompt, 3)
    [g] = adm.admit_ready()
    assert (g.stream, g.page_ids, g.copy_from) == (0, (), ())
    assert adm.finish("a", prompt + [1, 2]) == [CopyStep(0, (0, 1), 8, to_pages=True), EndStep(0)]
    adm.request("b", prompt + [1, 2, 3], 3)
    [g] = adm.admit_ready()
    assert g.steps() == [BeginStep(0, (), 0), CopyStep(0, (0, 1), 8, to_pages=False)]
    assert g.resumed_rows == 8
    adm.check_integrity()


def test_from_plan_matches_the_pool_step():
    p = plan([small()], [400], context=15, parallel=2, prompt_cache_bytes=64, kv_pages="on")
    adm = Admission.from_plan(p)
    assert (adm.pool.total, adm.cache.budget, adm.streams) == (p.pool_step().pages, 2, 2)


def test_same_calls_same_ids():
    def run():
        adm = paged(pages=8, streams=3, context=20, cache=3)
        out = []
        for i, n in enumerate([5, 9, 3, 12, 5]):
            adm.request(str(i), list(range(n)), 3)
            out += [g.page_ids for g in adm.admit_ready()]
            if i % 2:
                adm.finish(str(i - 1), list(range(5)))
        return out
    assert run() == run()


def test_keep_prompt_keeps_a_running_prompts_full_pages_once():
    # pages: shared by reference, no step; later requests for that prompt resume from them
    adm = paged(pages=8, streams=3, context=16, cache=4)
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]                 # 2 full pages of 4
    adm.request("a", prompt, 3)
    [a] = adm.admit_ready()
    assert adm.keep_prompt("a", prompt) == [] and tuple(adm.cache.lookup(prompt)) == a.page_ids[:2]
    assert adm.keep_prompt("gone", prompt) == []         # not running: nothing to keep
    adm.request("b", prompt, 3)
    [b] = adm.admit_ready()
    assert (b.kept, b.resumed_rows, b.page_ids[:2]) == (2, 8, a.page_ids[:2])
    adm.check_integrity()


def test_keep_prompt_on_windows_copies_only_what_the_cache_lacks():
    adm = Admission(paged=False, pages=4, page_rows=4, streams=2, context=16, cache_pages=4)
    prompt = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    adm.request("a", prompt, 3)
    [a] = adm.admit_ready()
    [copy] = adm.keep_prompt("a", prompt)                # window rows 0..7 -> two cache pages
    assert (copy.stream, len(copy.page_ids), copy.rows, copy.to_pages) == (a.stream, 2, 8, True)
    assert adm.keep_prompt("a", prompt) == []            # kept already: no copy to send
    assert adm.keep_prompt("gone", prompt) == []
    adm.request("b", prompt, 3)
    [b] = adm.admit_ready()
    assert b.resumed_rows == 8 and b.steps()[1:] == [CopyStep(b.stream, copy.page_ids, 8, False)]
    adm.check_integrity()
