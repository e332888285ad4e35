"""The scheduler's Wake (server/scheduler.py): the engine thread's events reach their event
loops from a thread of its own, each request's in the order they were put, and none is lost
around stop()."""
from __future__ import annotations

import asyncio
import threading
import time

from server.planner.admission import Admission
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler, Wake

from tests.guards.test_scheduler_guards import FakeDriver, expected


def wait_until(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.005)
    return cond()


class LoopThread:
    """A real asyncio loop on a thread of its own, as uvicorn's."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.t = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.t.start()

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.t.join(5)
        self.loop.close()


def test_each_sinks_events_arrive_in_the_order_they_were_put():
    lt = LoopThread()
    w = Wake()
    try:
        got = {k: [] for k in range(3)}
        for i in range(600):                     # three sinks, interleaved
            w.put(lt.loop, got[i % 3].append, i)
        assert wait_until(lambda: sum(map(len, got.values())) == 600)
        for k, xs in got.items():
            assert xs == list(range(k, 600, 3))
    finally:
        w.stop(5)
        lt.close()
    assert not w._thread.is_alive()


def test_a_gone_loop_drops_its_events_and_the_others_still_go():
    lt = LoopThread()
    gone = asyncio.new_event_loop()
    gone.close()                                 # call_soon_threadsafe raises RuntimeError
    w = Wake()
    try:
        got = []
        w.put(gone, got.append, "lost")
        w.put(lt.loop, got.append, "a")

        class Broken:                            # any other failure: logged, the thread lives
            def call_soon_threadsafe(self, fn, ev):
                raise ValueError("a bug")
        w.put(Broken(), got.append, "x")
        w.put(lt.loop, got.append, "b")
        assert wait_until(lambda: got == ["a", "b"])
        assert w._thread.is_alive()
    finally:
        w.stop(5)
        lt.close()


def test_after_stop_an_event_is_handed_over_at_once():
    class Now:
        def call_soon_threadsafe(self, fn, ev):
            fn(ev)
    w = Wake()
    w.stop(5)
    got = []
    w.put(Now(), got.append, 1)                 # no thread left to do it: done here, now
    assert got == [1] and not w._thread.is_alive()


def test_a_started_scheduler_streams_through_its_wake_and_stop_ends_it():
    lt = LoopThread()
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64)
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=4)
    assert s._wake is None                       # not started: _emit hands over at once
    s.start()
    try:
        got = {rid: [] for rid in ("a", "b")}

        class Q:
            def __init__(self, xs):
                self.put_nowait = xs.append
        for rid, prompt in (("a", [1, 2, 3]), ("b", [5, 6])):
            s.sinks[rid] = (lt.loop, Q(got[rid]))
            s.inbox.put(("new", GenRequest(rid, prompt, SamplingParams(max_tokens=6,
                                                                       temperature=0.0))))
        assert wait_until(lambda: all(xs and xs[-1].finish_reason for xs in got.values()))
        for rid, prompt in (("a", [1, 2, 3]), ("b", [5, 6])):
            evs = got[rid]
            assert [e.token_id for e in evs[:-1]] == expected(prompt, 6)
            assert evs[-1].finish_reason == "length" and len(evs) == 7
        wake = s._wake
    finally:
        s.stop()
        lt.close()
    assert not wake._thread.is_alive() and not s._thread.is_alive()
