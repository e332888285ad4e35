"""The engine thread, through the scheduler's public face (start, generate, stop, stats):
it runs a busy engine's rounds back to back, checks the ranks on every idle tick, cancels a
stream whose client left, stops cleanly (and in bounded time beside a stuck step), and after
a failure answers every request that still arrives, with the cause in the log."""
from __future__ import annotations

import asyncio
import logging
import threading
import time

from server.planner.admission import Admission
from server.ranks.rank_errors import RankLost
from server.ranks.steps import RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from test_scheduler_guards import FakeDriver, Loop, Metrics, Sink, expected, make


def wait_until(cond, timeout_s=5.0):
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def reply(s, rid, prompt, max_tokens, timeout_s=5.0):
    async def one():
        req = GenRequest(rid, list(prompt), SamplingParams(max_tokens=max_tokens, temperature=0.0))
        return [ev async for ev in s.generate(req)]
    return asyncio.run(asyncio.wait_for(one(), timeout_s))


class Counted(FakeDriver):
    def __init__(self):
        super().__init__()
        self.closed = 0

    def close(self):
        self.closed += 1


def spy_cancel(s):
    called, real = [], s.cancel
    s.cancel = lambda rid: (called.append(rid), real(rid))[1]
    return called


def test_a_busy_engine_runs_its_rounds_back_to_back():
    s, drv, adm = make()
    s.IDLE_TICK_S = 1.0       # a wait on the inbox between rounds would cost 12 s here
    cancelled = spy_cancel(s)
    s.start()
    try:
        evs = reply(s, "a", [5, 6, 7], 12, timeout_s=4.0)
    finally:
        s.stop()
    assert [e.token_id for e in evs[:-1]] == expected([5, 6, 7], 12)
    assert evs[-1].finish_reason == "length" and s.rounds == 12
    assert cancelled == []                         # a reply read to its end is not cancelled


def test_an_idle_engine_checks_the_ranks_each_tick_and_the_pool_once_per_change():
    s, drv, adm = make()
    s.IDLE_TICK_S = 0.01
    audits = []
    real = adm.check_integrity
    adm.check_integrity = lambda: (audits.append(s.rounds), real())[1]
    s.start()
    try:
        assert wait_until(lambda: drv.checks >= 5)
        assert audits == [0]                       # nothing ran yet: one audit, not one a tick
        for rid in ("a", "b"):
            reply(s, rid, [1, 2, 3], 2)
            seen = drv.checks
            assert wait_until(lambda: drv.checks >= seen + 5)
    finally:
        s.stop()
    assert audits == [0, 2, 4]                     # again each time the steps changed, then not again


def test_a_client_that_leaves_mid_reply_is_cancelled_by_the_next_round():
    class Gated(FakeDriver):                      # rounds after the first wait for the cue
        def __init__(self):
            super().__init__()
            self.go, self.rounds = threading.Event(), 0

        def run(self, step):
            if isinstance(step, RoundStep):
                self.rounds += 1
                if self.rounds > 1:
                    self.go.wait(10)
            return super().run(step)
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64, cache_pages=8)
    drv, m = Gated(), Metrics()
    s = Scheduler(drv, adm, context=64, prefill_chunk=16, metrics=m)
    cancelled = spy_cancel(s)
    s.start()
    req = GenRequest("gone", list(range(1, 10)), SamplingParams(max_tokens=40, temperature=0.0))

    async def leave_after_one():
        agen = s.generate(req)
        first = await agen.__anext__()
        await agen.aclose()                       # the client went away
        return first
    try:
        first = asyncio.run(asyncio.wait_for(leave_after_one(), 5))
        assert cancelled == ["gone"]              # in the inbox by now
        drv.go.set()
        assert wait_until(lambda: not s.active and adm.running == 0)
    finally:
        drv.go.set()
        s.stop()
    assert first.token_id == expected(list(range(1, 10)), 1)[0]
    assert m.calls[-1] == ("finished", "gone", "abort") and drv.rounds <= 2   # not 40
    assert adm.pool.kept == 0 and adm.pool.free == adm.pool.total   # a cut-off reply keeps nothing


def test_stop_ends_the_engine_without_an_error(caplog):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64)
    drv = Counted()
    s = Scheduler(drv, adm, context=64, prefill_chunk=4)
    s.IDLE_TICK_S = 5.0                           # stop() wakes it: no tick needed
    s.start()
    with caplog.at_level(logging.DEBUG, logger="foldserve"):
        reply(s, "a", [1, 2, 3], 2)
        time.sleep(0.05)                          # idle now, waiting on its inbox
        t0 = time.monotonic()
        s.stop()
        took = time.monotonic() - t0
    assert took < 2.5 and not s._thread.is_alive() and drv.closed == 1
    assert s.error is None and drv.ok is True and s.stats()["ranks_ok"] is True
    assert not [r for r in caplog.records if "engine loop stopped" in r.getMessage()]


def test_stop_gives_up_on_a_stuck_step_after_its_wait():
    class Stuck(Counted):
        def __init__(self):
            super().__init__()
            self.entered, self.release = threading.Event(), threading.Event()

        def run(self, step):
            if isinstance(step, RoundStep):
                self.entered.set()
                self.release.wait(10)
            return super().run(step)
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64)
    drv = Stuck()
    s = Scheduler(drv, adm, context=64, prefill_chunk=4)
    s.STOP_WAIT_S = 0.1
    s.sinks["a"] = (Loop(), Sink())
    s.inbox.put(("new", GenRequest("a", [1, 2, 3], SamplingParams(max_tokens=2, temperature=0.0))))
    s.start()
    try:
        assert drv.entered.wait(5)
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        stopper.join(3)
        returned = not stopper.is_alive()
    finally:
        drv.release.set()
    stopper.join(5)
    s._thread.join(5)
    assert returned and drv.closed == 1           # it waited its 0.1 s, then let the step be


class Boom(FakeDriver):
    def __init__(self, exc, failure=None):
        super().__init__()
        self.exc, self.failure = exc, failure

    def run(self, step):
        if isinstance(step, RoundStep):
            raise self.exc
        return super().run(step)


def failed(drv):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64)
    s = Scheduler(drv, adm, context=64, prefill_chunk=4)
    first = Sink()
    s.sinks["a"] = (Loop(), first)
    s.inbox.put(("new", GenRequest("a", [1, 2, 3], SamplingParams(max_tokens=2))))
    s.start()
    assert wait_until(lambda: s.error is not None and first)
    return s, first


def test_after_a_failure_every_request_that_still_arrives_is_answered(caplog):
    with caplog.at_level(logging.DEBUG, logger="foldserve"):
        s, first = failed(Boom(RuntimeError("a bug")))
        late = {rid: Sink() for rid in ("b", "c")}
        try:
            for rid, sink in late.items():        # past generate's own check: straight in
                s.sinks[rid] = (Loop(), sink)
                s.inbox.put(("cancel", rid))      # a cancel is no request: nothing to answer
                s.inbox.put(("new", GenRequest(rid, [1], SamplingParams(max_tokens=1))))
            assert wait_until(lambda: all(late.values()))
        finally:
            t0 = time.monotonic()
            s.stop()
            took = time.monotonic() - t0
    msg = "the engine stopped: a bug; restart the ranks"
    for sink in (first, *late.values()):
        assert len(sink) == 1 and sink[0].finish_reason == "error"
        assert (sink[0].error, sink[0].error_code, sink[0].code) == (msg, 503, None)
    assert took < 2.5 and not s._thread.is_alive()
    logged = [r for r in caplog.records if r.getMessage() == "engine loop stopped"]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR and logged[0].exc_info


def test_a_lost_rank_is_named_by_the_drivers_verdict_in_one_log_line(caplog):
    lost = RankLost(1, "no heartbeat for 2 s")
    with caplog.at_level(logging.DEBUG, logger="foldserve"):
        s, first = failed(Boom(RuntimeError("NCCL communicator aborted"), failure=lost))
        late = reply(s, "late", [1, 2], 2)        # generate answers it without the engine
        inbox = Sink()                            # past generate's own check: straight in
        s.sinks["inbox"] = (Loop(), inbox)
        s.inbox.put(("new", GenRequest("inbox", [1], SamplingParams(max_tokens=1))))
        assert wait_until(lambda: inbox)
        s.stop()
    msg = "the engine stopped: rank 1 lost: no heartbeat for 2 s; restart the ranks"
    for evs in (first, late, inbox):
        assert len(evs) == 1 and evs[0].finish_reason == "error"
        assert (evs[0].error, evs[0].error_code, evs[0].code) == (msg, 503, "rank_lost")
    assert s.error_code == "rank_lost" and s.stats()["ranks_ok"] is False
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert [r.getMessage() for r in errors] == ["engine loop stopped: rank 1 lost: no heartbeat for 2 s"]
    assert not errors[0].exc_info
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.getMessage() == "engine loop stopped"]
    assert len(debug) == 1 and debug[0].exc_info


class Grammar:
    """A stand-in grammar: complete after `n` tokens; its mask step can be held."""

    def __init__(self, n, hold=None):
        self.n, self.hold, self.prepared, self.masks = n, hold, threading.Event(), 0

    def constraint(self):
        g = self

        class Constraint:
            eaten = 0

            @property
            def done(self):
                return self.eaten >= g.n

            def prepare(self):
                g.masks += 1
                g.prepared.set()
                if g.hold is not None:
                    g.hold.wait(10)

            def consume(self, token):
                self.eaten += 1
        return Constraint()


class Masked(Counted):
    def sample(self, row, st):                    # arg-max under the (stand-in) grammar
        tok = int(row.argmax())
        st.record(tok)
        return tok, None, ()


def test_a_reply_ends_with_stop_when_its_grammar_is_complete():
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64)
    s = Scheduler(Masked(), adm, context=64, prefill_chunk=2)
    sink = Sink()
    s.sinks["g"] = (Loop(), sink)
    g = Grammar(3)
    s.inbox.put(("new", GenRequest("g", [5, 6, 7], SamplingParams(max_tokens=10, temperature=0.0,
                                                                   ignore_eos=True),
                                   grammar=g)))
    for _ in range(20):
        s._drain(block=False)
        s._admit()
        if not s.active and not s.waiting:
            break
        s._round()
    assert [e.token_id for e in sink[:-1]] == expected([5, 6, 7], 3)
    assert sink[-1].finish_reason == "stop" and adm.running == 0
    assert g.masks == 3                            # one mask per sampled row (not the first chunk's)


def test_stop_does_not_wait_for_a_mask_still_being_made():
    hold = threading.Event()
    g = Grammar(5, hold)
    adm = Admission(paged=True, pages=64, page_rows=4, streams=1, context=64)
    drv = Masked()
    s = Scheduler(drv, adm, context=64, prefill_chunk=4)
    s.STOP_WAIT_S = 0.1
    s.sinks["g"] = (Loop(), Sink())
    s.inbox.put(("new", GenRequest("g", [1, 2, 3], SamplingParams(max_tokens=5, temperature=0.0),
                                   grammar=g)))
    s.start()
    try:
        assert g.prepared.wait(5)                 # the mask thread is busy with it
        stopper = threading.Thread(target=s.stop)
        stopper.start()
        stopper.join(3)
        returned = not stopper.is_alive()
    finally:
        hold.set()
    stopper.join(5)
    s._thread.join(5)
    assert returned and drv.closed == 1


def test_an_idle_engine_sleeps_between_its_ticks():
    s, drv, adm = make()
    s.IDLE_TICK_S = 0.05
    t0 = time.monotonic()
    s.start()
    try:
        assert wait_until(lambda: drv.checks >= 3)
        reply(s, "a", [1, 2, 3], 2)
        time.sleep(0.1)
    finally:
        s.stop()
    took = time.monotonic() - t0
    # one check a tick (an item in the inbox may end a tick early: the request, the wake)
    assert 3 <= drv.checks <= took / 0.05 + 4, (drv.checks, took)
