"""Rounds keep every stream's chunk with its owner (solo == concurrent at the scheduler).

The driver is a fake: its logits row for a chunk names a token computed from that chunk
alone (its last token and position), so a stream's reply is the same alone or in company,
and a round that reorders, drops or mixes chunks gives some stream another's token."""
from __future__ import annotations

import time

import numpy as np
import pytest

from server.planner.admission import Admission
from server.ranks.steps import BeginStep, CopyStep, EndStep, RoundStep
from server.requests import GenRequest, SamplingParams
from server.active import Active
from server.scheduler import Scheduler
from server.host_sampling import HostSampling

V = 97


def next_token(last: int, pos: int) -> int:
    return (last * 31 + pos * 7 + 3) % V


class FakeDriver(HostSampling):
    """Rank 0 samples through its driver's `sampling`: here the driver itself, so a test
    overrides a sampling method on its driver."""
    ranks, ok = 1, True

    def __init__(self):
        super().__init__("cpu")
        self.sampling = self
        self.steps = []
        self.checks = 0

    def run(self, step):
        self.steps.append(step)
        if not isinstance(step, RoundStep):
            return None
        rows = [c for c in step.chunks if c.logits]
        out = np.zeros((len(rows), V), np.float32)
        for i, c in enumerate(rows):
            out[i, next_token(c.tokens[-1], c.start + len(c.tokens) - 1)] = 1.0
        return out

    def check(self):
        self.checks += 1

    def close(self):
        pass


class Loop:
    """Stands in for an event loop: call_soon_threadsafe runs at once."""

    def call_soon_threadsafe(self, fn, *a):
        fn(*a)


class Sink(list):
    def put_nowait(self, ev):
        self.append(ev)


def expected(prompt, n):
    ids, out = list(prompt), []
    for _ in range(n):
        t = next_token(ids[-1], len(ids) - 1)
        out.append(t)
        ids.append(t)
    return out


def make(paged=True, streams=4, pages=64, page_rows=4, context=64, chunk=3, budget=None,
         cache_pages=0):
    adm = Admission(paged=paged, pages=pages if paged else cache_pages, page_rows=page_rows,
                    streams=streams, context=context, cache_pages=cache_pages)
    drv = FakeDriver()
    s = Scheduler(drv, adm, context=context, prefill_chunk=chunk, token_budget=budget)
    return s, drv, adm


def submit(s, rid, prompt, max_tokens, **kw):
    sink = Sink()
    s.sinks[rid] = (Loop(), sink)
    s.inbox.put(("new", GenRequest(rid, list(prompt), SamplingParams(max_tokens=max_tokens,
                                                                     temperature=0.0, **kw))))
    return sink


def one_pass(s):
    """What the engine thread does once while busy (Scheduler._run)."""
    s._drain(block=False)
    s._admit()
    if s.active:
        s._round()


def spin(s, rounds=200):
    for _ in range(rounds):
        s._drain(block=False)
        s._admit()
        if not s.active and not s.waiting:
            return
        if s.active:
            s._round()
    raise AssertionError("the scheduler did not finish")


def tokens(sink):
    return [e.token_id for e in sink if e.finish_reason is None]


PROMPTS = {"a": [5, 6, 7, 8, 9, 10, 11], "b": [1, 2], "c": [40, 41, 42, 43, 44, 45, 46, 47, 48, 49],
           "d": [3]}


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_each_stream_gets_its_own_tokens_alone_or_in_company(paged):
    solo = {}
    for rid, p in PROMPTS.items():
        s, _, _ = make(paged)
        sink = submit(s, rid, p, 6)
        spin(s)
        solo[rid] = tokens(sink)
        assert solo[rid] == expected(p, 6), rid
        assert sink[-1].finish_reason == "length"
    s, drv, adm = make(paged)
    sinks = {rid: submit(s, rid, p, 6) for rid, p in PROMPTS.items()}
    spin(s)
    for rid in PROMPTS:
        assert tokens(sinks[rid]) == solo[rid], rid
        assert sinks[rid][-1].finish_reason == "length"
        assert sinks[rid][-1].prompt_tokens == len(PROMPTS[rid])
        assert sinks[rid][-1].error_code == 0 and sinks[rid][-1].error is None
    assert adm.running == 0 and adm.pool.held == 0
    adm.check_integrity()


def test_a_round_decodes_first_then_prefills_in_admission_order_under_the_budget():
    s, drv, _ = make(chunk=3, budget=5)
    submit(s, "a", [1, 2, 3, 4], 3)
    s._drain(block=False)
    s._admit()
    s._round()                                    # a: prefill 3 rows
    submit(s, "b", [7, 8, 9, 10, 11, 12, 13], 3)
    s._drain(block=False)
    s._admit()
    s._round()
    r = drv.steps[-1]
    assert isinstance(r, RoundStep)
    # a's last prompt row (asks for logits), then b's first chunk: 5 - 1 = 4 left, chunk 3
    assert [(c.stream, c.start, c.tokens, c.logits) for c in r.chunks] == [
        (0, 3, (4,), True), (1, 0, (7, 8, 9), False)]
    s._round()
    r = drv.steps[-1]
    a_tok = expected([1, 2, 3, 4], 1)[0]
    # decode of a first (one token), then b's prefill: min(chunk 3, budget 4, 4 left)
    assert [(c.stream, c.start, c.tokens, c.logits) for c in r.chunks] == [
        (0, 4, (a_tok,), True), (1, 3, (10, 11, 12), False)]
    s._round()
    r = [st for st in drv.steps if isinstance(st, RoundStep)][-1]
    assert isinstance(drv.steps[-1], EndStep) and drv.steps[-1].stream == 0   # a's 3 tokens
    assert [(c.stream, c.start, len(c.tokens), c.logits) for c in r.chunks] == [
        (0, 5, 1, True), (1, 6, 1, True)]
    assert s.rounds == 4


def test_the_budget_stops_prefill_and_a_zero_budget_prefills_nothing():
    s, drv, _ = make(chunk=8, budget=2, streams=3)
    for rid in ("a", "b", "c"):
        submit(s, rid, [9] * 12, 2)
    s._drain(block=False)
    s._admit()
    s._round()
    assert [(c.stream, len(c.tokens)) for c in drv.steps[-1].chunks] == [(0, 2)]


def test_stop_tokens_and_eos_end_a_request_and_the_context_bounds_it():
    p = [5, 6, 7]
    first = expected(p, 3)
    s, _, adm = make()
    sink = submit(s, "stop", p, 10, stop_token_ids=(first[1],))
    spin(s)
    assert tokens(sink) == first[:2] and sink[-1].finish_reason == "stop"
    s, _, _ = make()
    sink = Sink()
    s.sinks["eos"] = (Loop(), sink)
    s.inbox.put(("new", GenRequest("eos", p, SamplingParams(max_tokens=10, temperature=0.0),
                                   eos_ids=frozenset({first[0]}))))
    spin(s)
    assert tokens(sink) == first[:1] and sink[-1].finish_reason == "stop"
    s, _, _ = make()
    sink = Sink()
    s.sinks["ign"] = (Loop(), sink)
    s.inbox.put(("new", GenRequest("ign", p, SamplingParams(max_tokens=3, temperature=0.0,
                                                            ignore_eos=True),
                                   eos_ids=frozenset({first[0]}))))
    spin(s)
    assert tokens(sink) == first and sink[-1].finish_reason == "length"
    s, _, _ = make(context=8, pages=64)
    sink = submit(s, "ctx", p, 5)                  # 3 + 5 == context 8
    spin(s)
    assert len(tokens(sink)) == 5 and sink[-1].finish_reason == "length"


def test_finish_keeps_the_fed_rows_and_a_resumed_request_skips_them():
    s, drv, adm = make(cache_pages=8, pages=64)
    p = list(range(1, 14))                         # 13 tokens, pages of 4
    sink = submit(s, "a", p, 3)
    spin(s)
    assert adm.pool.kept > 0
    sink2 = submit(s, "b", p, 3)
    spin(s)
    assert tokens(sink2) == tokens(sink) == expected(p, 3)
    assert sink2[-1].cached_tokens == 12 and sink[-1].cached_tokens == 0
    assert all((e.prompt_tokens, e.cached_tokens) == (13, 12) for e in sink2)   # every token says so
    begins = [st for st in drv.steps if isinstance(st, BeginStep)]
    assert begins[1].kept == 3 and begins[1].page_ids[:3] == begins[0].page_ids[:3]
    rounds = [st for st in drv.steps if isinstance(st, RoundStep)]
    starts = [c.start for r in rounds for c in r.chunks if c.stream == 0]
    assert 12 in starts
    adm.check_integrity()


def test_windows_resume_copies_the_kept_rows_back():
    s, drv, adm = make(paged=False, cache_pages=8)
    p = list(range(1, 14))
    submit(s, "a", p, 3)
    spin(s)
    copies = [st for st in drv.steps if isinstance(st, CopyStep)]
    assert copies and copies[-1].to_pages
    sink = submit(s, "b", p, 3)
    spin(s)
    back = [st for st in drv.steps if isinstance(st, CopyStep)][-1]
    assert not back.to_pages and back.rows == 12
    assert tokens(sink) == expected(p, 3) and sink[-1].cached_tokens == 12


def test_cancel_waiting_and_running_requests_free_everything():
    s, drv, adm = make(streams=1)
    a = submit(s, "a", [1, 2, 3], 20)
    b = submit(s, "b", [4, 5, 6], 20)
    s._drain(block=False)
    s._admit()
    s._round()
    assert "b" in s.waiting and "a" in s.active
    s.cancel("b")
    s._drain(block=False)
    assert b[-1].finish_reason == "abort" and "b" not in s.waiting and adm.waiting == 0
    s.cancel("a")
    s._drain(block=False)
    assert a[-1].finish_reason == "abort" and not s.active
    assert isinstance(drv.steps[-1], EndStep)
    assert adm.pool.free == adm.pool.total and adm.pool.kept == 0
    s.cancel("nobody")
    s._drain(block=False)
    adm.check_integrity()


def test_a_refused_request_is_answered_with_its_error_and_nothing_runs():
    s, drv, adm = make(context=8)
    sink = submit(s, "big", [1] * 6, 5)
    s._drain(block=False)
    assert sink[-1].finish_reason == "error" and sink[-1].error_code == 400
    assert "context" in sink[-1].error and not s.waiting and not drv.steps


def test_stats_say_what_the_pool_and_streams_hold():
    s, drv, adm = make(streams=2, pages=32)
    submit(s, "a", [1, 2, 3], 4)
    submit(s, "b", [1, 2, 3], 4)
    submit(s, "c", [1, 2, 3], 4)
    s._drain(block=False)
    s._admit()
    st = s.stats()
    assert st["streams_busy"] == 2 and st["streams_total"] == 2 and st["queue"] == 1
    assert st["pages_total"] == 32 and st["pages_free"] == 32 - 4 and st["pages_kept"] == 0
    assert st["paged"] is True and st["ranks_ok"] is True and st["error"] is None
    assert st["context"] == 64 and st["rounds"] == 0 and st["ranks"] == 1
    assert st["page_rows"] == 4 and st["cache_pages"] == 0
    assert st["prompt_tokens_done"] == 0 and st["generation_tokens_done"] == 0
    spin(s)                                       # 3 prompt rows and 4 tokens each
    st = s.stats()
    assert st["prompt_tokens_done"] == 9 and st["generation_tokens_done"] == 12
    assert make(cache_pages=5)[0].stats()["cache_pages"] == 5


def test_active_ids_and_token_at_agree():
    a = Active(GenRequest("x", [1, 2, 3], SamplingParams()), 0, (), 0, None)
    a.out += [7, 8]
    assert a.ids == [1, 2, 3, 7, 8] and a.length == 5
    assert [a.token_at(i) for i in range(5)] == a.ids
    assert a.prefilling
    a.fed = 3
    assert not a.prefilling


def test_check_asks_admission_with_both_numbers():
    from server.planner.admission import Refused
    s, _, _ = make(context=16)
    s.check(3, 13)
    with pytest.raises(Refused, match="the prompt has 3 tokens and max_tokens asks for 14"):
        s.check(3, 14)
    with pytest.raises(Refused, match="max_tokens is 0"):
        s.check(3, 0)


def test_ranks_ok_needs_the_driver_and_no_error():
    s, drv, _ = make()
    assert s.stats()["ranks_ok"] is True
    drv.ok = False
    assert s.stats()["ranks_ok"] is False
    drv.ok, s.error = True, "x"
    assert s.stats()["ranks_ok"] is False and s.stats()["error"] == "x"


def test_sampled_replies_are_the_same_alone_or_in_company():
    def run(rids):
        s, _, adm = make()
        sinks = {}
        for rid in rids:
            sink = Sink()
            s.sinks[rid] = (Loop(), sink)
            s.inbox.put(("new", GenRequest(rid, list(PROMPTS[rid]),
                                           SamplingParams(max_tokens=5, temperature=0.9, seed=3))))
            sinks[rid] = sink
        spin(s)
        adm.check_integrity()
        return {rid: tokens(k) for rid, k in sinks.items()}
    together = run(list(PROMPTS))
    for rid in PROMPTS:
        assert run([rid])[rid] == together[rid], rid


def test_the_engine_thread_serves_and_stops():
    import asyncio
    s, drv, adm = make()
    s.start()

    async def one(rid):
        req = GenRequest(rid, list(PROMPTS[rid]), SamplingParams(max_tokens=4, temperature=0.0))
        return [ev async for ev in s.generate(req)]

    async def all_():
        return await asyncio.gather(*(one(r) for r in PROMPTS))
    try:
        got = asyncio.run(all_())
        deadline = time.monotonic() + 5
        while drv.checks == 0 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        s.stop()
    for rid, evs in zip(PROMPTS, got):
        assert [e.token_id for e in evs[:-1]] == expected(PROMPTS[rid], 4)
        assert evs[-1].finish_reason == "length" and evs[-1].token_id is None
    assert drv.checks > 0 and s._checked == s._steps
    assert not s._thread.is_alive() and s.sinks == {}
    assert adm.pool.free == adm.pool.total


class Boom(FakeDriver):
    def run(self, step):
        if isinstance(step, RoundStep):
            raise RuntimeError("rank 1 lost")
        return super().run(step)


def test_a_failing_round_stops_the_engine_and_answers_everyone():
    import asyncio
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64)
    drv = Boom()
    s = Scheduler(drv, adm, context=64, prefill_chunk=4)
    s.start()

    async def one(rid):
        req = GenRequest(rid, [1, 2, 3], SamplingParams(max_tokens=4, temperature=0.0))
        return [ev async for ev in s.generate(req)]

    async def both():
        return await asyncio.gather(one("a"), one("b"))
    try:
        a, b = asyncio.run(both())
        late = asyncio.run(asyncio.wait_for(_collect(s, "c"), 10))
        s.inbox.put(("new", GenRequest("d", [1], SamplingParams(max_tokens=1))))
        time.sleep(0.1)
    finally:
        s.stop()
    msg = "the engine stopped: rank 1 lost; restart the ranks"
    for evs in (a, b, late):
        assert len(evs) == 1 and evs[0].finish_reason == "error"
        assert evs[0].error == msg and evs[0].error_code == 503
    assert s.error == msg and drv.ok is False and not s.active and not s.waiting
    assert s.stats()["ranks_ok"] is False


async def _collect(s, rid):
    req = GenRequest(rid, [1, 2], SamplingParams(max_tokens=2))
    return [ev async for ev in s.generate(req)]


def test_emit_to_a_closed_loop_or_an_unknown_request_is_ignored():
    s, _, _ = make()

    class Gone:
        def call_soon_threadsafe(self, *a):
            raise RuntimeError("Event loop is closed")
    from server.requests import TokenEvent
    s.sinks["x"] = (Gone(), Sink())
    s._emit("x", TokenEvent(1))
    s._emit("nobody", TokenEvent(1))
    s._emit("x", TokenEvent(None, finish_reason="stop"))
    assert "x" not in s.sinks


class Metrics:
    def __init__(self):
        self.calls = []

    def admitted(self, req, wait, resumed):
        self.calls.append(("admitted", req.id, wait >= 0, resumed))

    def finished(self, a, reason):
        self.calls.append(("finished", a.req.id, reason))


def test_metrics_hear_each_admission_and_end():
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64, cache_pages=8)
    m = Metrics()
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=4, metrics=m)
    p = list(range(1, 10))
    submit(s, "a", p, 2)
    spin(s)
    submit(s, "b", p, 2)
    spin(s)
    assert m.calls == [("admitted", "a", True, 0), ("finished", "a", "length"),
                       ("admitted", "b", True, 8), ("finished", "b", "length")]


def test_a_cut_off_request_keeps_nothing_in_the_prompt_cache():
    s, drv, adm = make(cache_pages=8)
    sink = submit(s, "a", list(range(1, 14)), 10)
    s._drain(block=False)
    s._admit()
    for _ in range(6):
        s._round()
    s.cancel("a")
    s._drain(block=False)
    assert sink[-1].finish_reason == "abort" and sink[-1].error_code == 0
    assert adm.pool.kept == 0 and adm.pool.free == adm.pool.total and not s.active


def test_a_client_that_leaves_frees_its_stream():
    import asyncio
    s, drv, adm = make()
    s.start()
    req = GenRequest("gone", [1, 2, 3], SamplingParams(max_tokens=40, temperature=0.0))

    async def leave_early():
        agen = s.generate(req)
        first = await agen.__anext__()
        await agen.aclose()                      # the client went away after one token
        return first
    try:
        first = asyncio.run(leave_early())
        deadline = time.monotonic() + 10
        while (s.active or adm.running) and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        s.stop()
    assert first.token_id == expected([1, 2, 3], 1)[0]
    assert req.arrival > 0 and not s.active and adm.running == 0 and adm.pool.held == 0


class BadSample(FakeDriver):
    def sample(self, row, st):
        raise RuntimeError("planted")


def test_a_request_whose_sampling_fails_ends_alone_with_500_and_keeps_nothing():
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64, cache_pages=8)
    s = Scheduler(BadSample(), adm, context=64, prefill_chunk=16)
    bad = Sink()
    s.sinks["bad"] = (Loop(), bad)
    s.inbox.put(("new", GenRequest("bad", list(range(1, 14)),
                                   SamplingParams(max_tokens=3, temperature=0.9, seed=1))))
    good = submit(s, "good", list(range(20, 33)), 3)    # greedy: the arg-max path, no sample()
    spin(s)
    assert len(bad) == 1 and bad[0].finish_reason == "error" and bad[0].token_id is None
    assert (bad[0].error, bad[0].error_code) == ("sampling failed: planted", 500)
    assert tokens(good) == expected(list(range(20, 33)), 3)
    assert (good[-1].finish_reason, good[-1].error, good[-1].error_code) == ("length", None, 0)
    # good fed 13 + 2 rows: 3 full pages kept; the cut-off request's 13 rows keep none
    assert adm.pool.kept == 3 and adm.pool.held == 0
    adm.check_integrity()
