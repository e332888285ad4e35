"""n > 1 at the scheduler, on a stand-in engine that keeps what rounds write (kv_driver):
choices 1.. (GenRequest.follows) wait while choice 0 waits or prefills, enter admission in
the round its last prompt row is written (its prompt's full pages kept then, not at its
end), resume from those pages and answer as a fresh request does; one that arrives once
choice 0's prompt is written enters at once. Whatever ends choice 0 early (a cancel while
it waits or prefills, a sampler refusal) lets its choices go on alone, and a cancelled
choice leaves without troubling the others. The real-model version of the first test is
tests/model/test_choices_share.py; these run in milliseconds."""
from __future__ import annotations

import pytest

from kv_driver import KVDriver, reply
from server.planner.admission import Admission
from server.ranks.steps import BeginStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from test_scheduler_guards import Loop, Sink, one_pass, spin, tokens

PR, CTX = 4, 64
PROMPT = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]          # 11 tokens: 2 full pages of 4
KEPT = 8


def make(paged=True, streams=4, cache=16, chunk=4, driver=None):
    adm = Admission(paged=paged, pages=64 if paged else cache, page_rows=PR, streams=streams,
                    context=CTX, cache_pages=cache)
    drv = driver or KVDriver(paged, PR, CTX)
    return Scheduler(drv, adm, context=CTX, prefill_chunk=chunk), drv, adm


def send(s, rid, prompt, max_tokens, follows=None):
    sink = Sink()
    s.sinks[rid] = (Loop(), sink)
    s.inbox.put(("new", GenRequest(rid, list(prompt), SamplingParams(max_tokens=max_tokens,
                                                                     temperature=0.0),
                                   follows=follows)))
    return sink


def begun(drv) -> int:
    return sum(isinstance(st, BeginStep) for st in drv.steps)


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_choices_wait_for_choice_0s_prompt_then_resume_from_it(paged):
    s, drv, adm = make(paged)
    c0 = send(s, "c-0", PROMPT, 6)
    c1 = send(s, "c-1", PROMPT, 6, follows="c-0")       # arrives while c-0 waits
    one_pass(s)                                          # c-0: rows 0..3
    assert list(s.active) == ["c-0"] and set(s.waiting) == {"c-1"}
    assert s.stats()["queue"] == 1 and adm.running == 1
    c2 = send(s, "c-2", PROMPT, 6, follows="c-0")       # arrives while c-0 prefills
    one_pass(s)                                          # c-0: rows 4..7
    assert list(s.active) == ["c-0"] and set(s.waiting) == {"c-1", "c-2"}
    one_pass(s)                                          # c-0: rows 8..10, its first token
    assert list(s.active) == ["c-0"] and len(tokens(c0)) == 1
    one_pass(s)                                          # c-1, c-2 enter beside c-0's decode
    assert list(s.active) == ["c-0", "c-1", "c-2"] and not s.waiting
    spin(s)
    for sink in (c0, c1, c2):                            # resumed == fresh
        assert tokens(sink) == reply(PROMPT, 6)
        assert sink[-1].finish_reason == "length" and sink[-1].error is None
    assert all((e.prompt_tokens, e.cached_tokens) == (11, 0) for e in c0)
    for sink in (c1, c2):
        assert all((e.prompt_tokens, e.cached_tokens) == (11, KEPT) for e in sink)
    # the prompt prefilled once; each other choice only its last part page
    assert s.prompt_tokens_done == 11 + 2 * (11 - KEPT)
    assert not s.held and not s.waiting and adm.running == 0 and adm.pool.held == 0
    adm.check_integrity()


def test_a_choice_that_comes_once_choice_0s_prompt_is_written_enters_at_once():
    s, drv, adm = make()
    c0 = send(s, "c-0", PROMPT, 8)
    for _ in range(3):
        one_pass(s)                                      # c-0's prompt written, decoding
    assert not s.active["c-0"].prefilling
    c1 = send(s, "c-1", PROMPT, 2, follows="c-0")
    one_pass(s)
    assert set(s.active) == {"c-0", "c-1"} and not s.waiting and not s.held
    spin(s)
    c2 = send(s, "c-2", PROMPT, 2, follows="c-0")       # c-0 is gone: nothing to wait for
    one_pass(s)
    assert list(s.active) == ["c-2"]
    spin(s)
    assert tokens(c0) == reply(PROMPT, 8)
    assert tokens(c1) == tokens(c2) == reply(PROMPT, 2)
    assert c2[-1].cached_tokens > 0                      # what c-0 left kept at its end
    adm.check_integrity()


def test_a_cancelled_choice_leaves_alone_and_the_others_go_on():
    s, drv, adm = make()
    c0 = send(s, "c-0", PROMPT, 4)
    c1 = send(s, "c-1", PROMPT, 4, follows="c-0")
    c2 = send(s, "c-2", PROMPT, 4, follows="c-0")
    one_pass(s)
    s.cancel("c-1")                                      # held: it never runs
    spin(s)
    assert [(e.token_id, e.finish_reason) for e in c1] == [(None, "abort")]
    assert tokens(c0) == tokens(c2) == reply(PROMPT, 4)
    assert c2[-1].cached_tokens == KEPT
    assert begun(drv) == 2                               # c-0 and c-2 only
    assert not s.held and adm.running == 0
    adm.check_integrity()


def test_choice_0_cancelled_while_it_waits_lets_its_choices_go_on_alone():
    s, drv, adm = make(streams=1)
    x = send(s, "x", [1, 2, 3], 3)                       # holds the one stream
    one_pass(s)
    c0 = send(s, "c-0", PROMPT, 3)
    c1 = send(s, "c-1", PROMPT, 3, follows="c-0")
    one_pass(s)
    assert "c-0" in s.waiting and [r.id for r in s.held["c-0"]] == ["c-1"]
    s.cancel("c-0")
    spin(s)
    assert [(e.token_id, e.finish_reason) for e in c0] == [(None, "abort")]
    assert tokens(x) == reply([1, 2, 3], 3)
    assert tokens(c1) == reply(PROMPT, 3) and c1[-1].cached_tokens == 0   # prefilled itself
    assert c1[-1].finish_reason == "length"
    assert not s.held and adm.running == 0
    adm.check_integrity()


def test_choice_0_cancelled_while_it_prefills_lets_its_choices_go_on_alone():
    s, drv, adm = make()
    c0 = send(s, "c-0", PROMPT, 3)
    c1 = send(s, "c-1", PROMPT, 3, follows="c-0")
    one_pass(s)                                          # c-0 has rows 0..3 of 11
    assert s.active["c-0"].prefilling
    s.cancel("c-0")
    one_pass(s)                                          # c-0 ends; c-1 is admitted
    assert list(s.active) == ["c-1"] and not s.held
    spin(s)
    assert [(e.token_id, e.finish_reason) for e in c0] == [(None, "abort")]
    assert tokens(c1) == reply(PROMPT, 3) and c1[-1].cached_tokens == 0
    adm.check_integrity()


class RefusesOnce(KVDriver):
    """A sampler that refuses its first request (a transient failure), then works."""

    refused = 0

    def sampler_state(self, *a, **kw):
        if not self.refused:
            self.refused += 1
            raise RuntimeError("planted")
        return super().sampler_state(*a, **kw)


def test_choice_0_the_sampler_refuses_lets_its_choices_go_on_alone():
    s, drv, adm = make(driver=RefusesOnce(True, PR, CTX))
    c0 = send(s, "c-0", PROMPT, 3)
    c1 = send(s, "c-1", PROMPT, 3, follows="c-0")
    spin(s)
    assert [(e.finish_reason, e.error_code) for e in c0] == [("error", 500)]
    assert tokens(c1) == reply(PROMPT, 3) and c1[-1].finish_reason == "length"
    assert not s.held and adm.running == 0
    adm.check_integrity()
