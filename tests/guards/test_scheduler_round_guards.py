"""A round's sampling, through the driver it is given: a round whose logits can draw rows
(logits.sample_rows, a GPU round) draws every row in one call unless all are greedy, which
take the arg-max; a failed launch samples that round on the host (driver.sample); each
token is recorded in its own sampler; the token budget is shared by decodes and prefill;
metrics hear each round and each first token."""
from __future__ import annotations

import logging
import time
from collections import Counter

import numpy as np

from server.planner.admission import Admission
from server.ranks.steps import RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from test_scheduler_guards import (V, BadSample, FakeDriver, Loop, Sink, expected, make, next_token,
                                   spin, submit, tokens)

DRAWN = []                                 # each sample_rows call: (rows, samplers, produced)


class DeviceLogits(np.ndarray):
    """Logits that can draw rows where they lie: token = arg-max + 1 + tokens produced."""

    def sample_rows(self, rows, samplers, produced):
        DRAWN.append((list(rows), list(samplers), list(produced)))
        return [(int(np.asarray(self[r]).argmax()) + 1 + k) % V for r, k in zip(rows, produced)]


class Device(FakeDriver):
    def __init__(self):
        super().__init__()
        self.states, self.argmax_calls = {}, 0

    def run(self, step):
        out = super().run(step)
        return out if out is None else out.view(DeviceLogits)

    def sampler_state(self, params, prompt_ids, salt, **kw):
        st = super().sampler_state(params, prompt_ids, salt, **kw)
        self.states[tuple(prompt_ids)] = st
        return st

    def argmax_rows(self, logits):
        self.argmax_calls += 1
        return super().argmax_rows(logits)

    def sample(self, row, st):                   # the host's sampler: arg-max + 2, logprob -0.5
        tok = (int(np.asarray(row).argmax()) + 2) % V
        st.record(tok)
        return tok, -0.5, ((tok, -0.5),)


def chain(prompt, n, shift):
    ids, out = list(prompt), []
    for k in range(n):
        t = (next_token(ids[-1], len(ids) - 1) + shift(k)) % V
        out.append(t)
        ids.append(t)
    return out


PG, PD, PH = [5, 6, 7], [8, 9], [10, 11, 12, 13]


def run(drv, which):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=3, context=64)
    s = Scheduler(drv, adm, context=64, prefill_chunk=16)
    params = {"g": (PG, dict(temperature=0.0)), "d": (PD, dict(temperature=0.9, seed=7)),
              "h": (PH, dict(temperature=0.9, seed=7, logprobs=1))}
    sinks = {}
    for rid in which:
        p, kw = params[rid]
        sinks[rid] = Sink()
        s.sinks[rid] = (Loop(), sinks[rid])
        s.inbox.put(("new", GenRequest(rid, list(p), SamplingParams(max_tokens=3, **kw))))
    spin(s)
    adm.check_integrity()
    return s, sinks


def test_a_device_round_draws_every_row_in_one_call_and_records_each_in_its_own_sampler():
    DRAWN.clear()
    drv = Device()
    s, sinks = run(drv, "gdh")
    g, d, h = (tokens(sinks[r]) for r in "gdh")
    for p, toks in ((PG, g), (PD, d), (PH, h)):               # drawn where the logits lie
        assert toks == chain(p, 3, lambda k: 1 + k)
    st = drv.states
    # one call a round for rows 0, 1, 2 (g, d, h), each with the tokens it has so far
    assert DRAWN == [([0, 1, 2], [st[tuple(PG)], st[tuple(PD)], st[tuple(PH)]], [k] * 3)
                     for k in range(3)]
    for p, toks in ((PG, g), (PD, d), (PH, h)):
        assert st[tuple(p)].counts == Counter(toks) and st[tuple(p)].produced == 3
    assert [(e.logprob, e.top_logprobs) for e in sinks["d"][:-1]] == [(None, ())] * 3
    assert all(isinstance(e.logprob, float) for e in sinks["h"][:-1])   # asked for: from the row
    for r, p in (("g", PG), ("d", PD), ("h", PH)):  # every event says what the prompt was
        assert all((e.prompt_tokens, e.cached_tokens) == (len(p), 0) for e in sinks[r])
    assert drv.argmax_calls == 0 and s.rounds == 3


def test_a_round_of_greedy_rows_alone_takes_the_arg_max_and_draws_nothing():
    DRAWN.clear()
    drv = Device()
    s, sinks = run(drv, "g")
    assert tokens(sinks["g"]) == expected(PG, 3)
    assert DRAWN == [] and drv.argmax_calls == 3
    assert drv.states[tuple(PG)].counts == Counter(expected(PG, 3))   # recorded in its sampler


class Failing(Device):
    def run(self, step):
        out = super().run(step)
        return out if out is None else out.view(FailingLogits)


class FailingLogits(np.ndarray):
    def sample_rows(self, rows, samplers, produced):
        raise RuntimeError("planted launch failure")


def test_a_failed_launch_samples_that_round_on_the_host(caplog):
    drv = Failing()
    with caplog.at_level(logging.ERROR, logger="foldserve"):
        s, sinks = run(drv, "gdh")
    assert tokens(sinks["g"]) == expected(PG, 3)                  # the arg-max
    assert tokens(sinks["d"]) == chain(PD, 3, lambda k: 2)        # the host's sampler
    assert tokens(sinks["h"]) == chain(PH, 3, lambda k: 2)
    assert [(e.logprob, e.top_logprobs) for e in sinks["h"][:-1]] == [
        (-0.5, ((t, -0.5),)) for t in tokens(sinks["h"])]
    logged = [r for r in caplog.records if r.getMessage() == "device sampling; this round samples on the host"]
    assert len(logged) == 3 and all(r.exc_info for r in logged) and drv.argmax_calls == 3


def test_decodes_take_their_share_of_the_token_budget():
    s, drv, _ = make(chunk=8, budget=2, streams=2)
    submit(s, "a", [1, 2], 5)
    s._drain(block=False)
    s._admit()
    s._round()                                   # a: its whole prompt, decoding from now on
    submit(s, "b", list(range(20, 30)), 2)
    s._drain(block=False)
    s._admit()
    s._round()
    # a's decode takes 1 of the 2: b prefills 1 row (not 2, not 0)
    assert [(c.stream, c.start, len(c.tokens)) for c in drv.steps[-1].chunks] == [(0, 2, 1), (1, 0, 1)]


class Metrics:
    def __init__(self):
        self.fed, self.waits, self.times = [], [], []

    def admitted(self, req, wait, resumed):
        self.waits.append(wait)

    def iteration(self, fed):
        self.fed.append(fed)

    def finished(self, a, reason):
        self.times.append((a.admitted_at, a.first_token_at))


def test_metrics_hear_the_wait_the_tokens_of_each_round_and_the_first_token():
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64)
    m = Metrics()
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=2, metrics=m)
    t0 = time.monotonic()
    s.sinks["a"] = (Loop(), Sink())
    s.inbox.put(("new", GenRequest("a", [1, 2, 3, 4, 5], SamplingParams(max_tokens=3, temperature=0.0),
                                   arrival=t0)))
    spin(s)
    t1 = time.monotonic()
    assert m.fed == [2, 2, 1, 1, 1]
    assert len(m.waits) == 1 and 0 <= m.waits[0] <= t1 - t0
    (admitted, first), = m.times
    assert t0 <= admitted <= first <= t1            # the first token came after the admission


def test_a_failed_sampling_is_logged_and_delays_no_other_stream(caplog):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=3, context=64)
    s = Scheduler(BadSample(), adm, context=64, prefill_chunk=16)
    before = submit(s, "before", [7, 8], 3)
    bad = Sink()
    s.sinks["bad"] = (Loop(), bad)
    s.inbox.put(("new", GenRequest("bad", [1, 2, 3], SamplingParams(max_tokens=3, temperature=0.9))))
    good = submit(s, "good", [4, 5, 6], 3)         # rows: before, bad, good
    with caplog.at_level(logging.ERROR, logger="foldserve"):
        spin(s)
    assert bad[-1].finish_reason == "error"
    assert tokens(before) == expected([7, 8], 3) and tokens(good) == expected([4, 5, 6], 3)
    assert s.rounds == 3                           # 3 tokens in 3 rounds each, as alone
    logged = [r for r in caplog.records if r.getMessage() == "request bad: sampling"]
    assert len(logged) == 1 and logged[0].exc_info


class Refusing(FakeDriver):
    def sampler_state(self, params, prompt_ids, salt, **kw):
        if params.temperature == 0.5:
            raise ValueError("planted")
        return super().sampler_state(params, prompt_ids, salt, **kw)


def test_a_request_the_sampler_refuses_ends_alone_and_gives_its_stream_back(caplog):
    adm = Admission(paged=True, pages=16, page_rows=4, streams=2, context=64)
    s = Scheduler(Refusing(), adm, context=64, prefill_chunk=16)
    bad = Sink()
    s.sinks["bad"] = (Loop(), bad)
    s.inbox.put(("new", GenRequest("bad", [1, 2, 3], SamplingParams(max_tokens=3, temperature=0.5))))
    good = submit(s, "good", [4, 5, 6], 3)          # admitted in the same pass, after it
    with caplog.at_level(logging.ERROR, logger="foldserve"):
        s._drain(block=False)
        s._admit()
        assert list(s.active) == ["good"] and not s.waiting and adm.running == 1
        spin(s)
    assert len(bad) == 1
    assert (bad[0].token_id, bad[0].finish_reason, bad[0].error_code, bad[0].error) == (
        None, "error", 500, "the sampler refused this request: planted")
    assert tokens(good) == expected([4, 5, 6], 3) and good[-1].finish_reason == "length"
    assert adm.running == 0 and adm.pool.free == adm.pool.total
    logged = [r for r in caplog.records if r.getMessage() == "request bad: sampler"]
    assert len(logged) == 1 and logged[0].exc_info
    adm.check_integrity()


def sampled(salt, eos=frozenset(), **kw):
    adm = Admission(paged=True, pages=16, page_rows=4, streams=1, context=64)
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=16, seed_salt=salt)
    sink = Sink()
    s.sinks["x"] = (Loop(), sink)
    s.inbox.put(("new", GenRequest("x", [3, 4, 5], SamplingParams(max_tokens=6, **kw), eos_ids=eos)))
    spin(s)
    return sink


def test_the_seed_salt_reaches_the_sampler():
    kw = dict(temperature=1.5, seed=11)
    a, b, c = (tokens(sampled(salt, **kw)) for salt in (0, 1, 1))
    assert b == c and a != b                        # the salt changes the draw, the same salt not


def test_the_eos_ids_reach_the_sampler_for_min_tokens():
    first = expected([3, 4, 5], 1)[0]
    sink = sampled(0, eos=frozenset({first}), temperature=0.0, min_tokens=2)
    got = tokens(sink)
    assert len(got) >= 2 and got[0] != first        # eos held back for the first 2 tokens


def test_a_stream_past_a_chunk_without_logits_still_samples_in_that_round():
    s, drv, _ = make(chunk=3)
    a = submit(s, "a", [5, 6, 7, 8, 9, 10, 11], 2)   # 3 of 7 rows: no logits yet
    b = submit(s, "b", [1, 2], 2)                     # its whole prompt: a token this round
    s._drain(block=False)
    s._admit()
    s._round()
    assert tokens(a) == [] and tokens(b) == expected([1, 2], 1)


def test_the_defaults_chunk_256_a_budget_of_at_least_64_and_salt_0():
    adm = Admission(paged=True, pages=64, page_rows=16, streams=1, context=512)
    drv = FakeDriver()
    s = Scheduler(drv, adm, context=512)
    submit(s, "a", [7] * 300, 1)
    spin(s)
    assert [len(c.tokens) for st in drv.steps if isinstance(st, RoundStep) for c in st.chunks] == [256, 44]
    adm = Admission(paged=True, pages=64, page_rows=4, streams=8, context=64)
    drv = FakeDriver()
    s = Scheduler(drv, adm, context=64, prefill_chunk=16)
    for i in range(8):
        submit(s, f"r{i}", [9] * 16, 1)
    s._drain(block=False)
    s._admit()
    s._round()
    (r,) = [st for st in drv.steps if isinstance(st, RoundStep)]
    assert sum(len(c.tokens) for c in r.chunks) == 64      # max(16, 64)
    kw = dict(temperature=1.5, seed=11)
    assert tokens(sampled(0, **kw)) == tokens(sampled_default(**kw))


def sampled_default(**kw):
    adm = Admission(paged=True, pages=16, page_rows=4, streams=1, context=64)
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=16)
    sink = Sink()
    s.sinks["x"] = (Loop(), sink)
    s.inbox.put(("new", GenRequest("x", [3, 4, 5], SamplingParams(max_tokens=6, **kw))))
    spin(s)
    return sink


def test_the_engine_and_mask_threads_are_named_daemons():
    import threading
    s, drv, _ = make()
    s.start()
    try:
        s._host.submit(lambda: None).result(5)       # the mask thread exists once used
        named = {t.name: t.daemon for t in threading.enumerate()}
    finally:
        s.stop()
    assert named.get("foldserve-engine") is True      # it never keeps the process alive
    assert [n for n in named if n.startswith("foldserve-masks")] == ["foldserve-masks_0"]


def test_a_refusal_with_a_status_of_its_own_is_answered_with_it():
    class Busy(Exception):
        status = 429

    class Full(Admission):
        def request(self, req_id, prompt_ids, max_tokens, **kw):
            raise Busy("the queue is full")
    s = Scheduler(FakeDriver(), Full(paged=True, pages=8, page_rows=4, streams=1, context=64),
                  context=64)
    sink = submit(s, "a", [1, 2], 2)
    s._drain(block=False)
    assert [(e.finish_reason, e.error, e.error_code) for e in sink] == [("error", "the queue is full", 429)]


def key_round(keys, c_prompt=200):
    """a decodes; b (100 rows) and c then prefill beside it under `keys` attention reads."""
    adm = Admission(paged=True, pages=96, page_rows=16, streams=3, context=512)
    drv = FakeDriver()
    s = Scheduler(drv, adm, context=512, prefill_chunk=256, token_budget=1000, prefill_keys=keys)
    submit(s, "a", [1, 2], 5)
    s._drain(block=False)
    s._admit()
    s._round()
    submit(s, "b", [3] * 100, 2)
    submit(s, "c", [4] * c_prompt, 2)
    s._drain(block=False)
    s._admit()
    s._round()
    return [(c.stream, len(c.tokens)) for c in drv.steps[-1].chunks]


def test_the_prefill_keys_of_a_round_are_shared_by_its_prompts_in_turn():
    # b reads 100 x 100 keys; c gets what is left: 8,100 -> 90 rows (90 x 90)
    assert key_round(10000 + 8100) == [(0, 1), (1, 100), (2, 90)]
    # nothing left: c waits for the next round; one key left: c still advances its floor
    assert key_round(10000) == [(0, 1), (1, 100)]
    assert key_round(10001) == [(0, 1), (1, 100), (2, 64)]


def test_prefill_take_is_the_largest_take_within_the_keys_never_under_the_floor():
    import pytest
    from server.round_build import KEYS_FLOOR, prefill_take
    for fed in (0, 1, 37, 500):
        for left in (0, 1, 63, 64, 65, 200):
            for cap in (0, 1, 64, 100, 256):
                for keys in (None, 0, 1, 64 * 64, 90 * 90, 90 * 90 + 1, 100 * (500 + 100), 10 ** 7):
                    n = min(cap, left)
                    if keys is not None:
                        fits = max((k for k in range(n + 1) if k * (fed + k) <= keys), default=0)
                        n = min(n, max(fits, KEYS_FLOOR))
                    assert prefill_take(fed, left, cap, keys) == n, (fed, left, cap, keys)
    with pytest.raises(ValueError, match=r"^prefill_keys -1: 0 or more \(0: no bound\)$"):
        Scheduler(FakeDriver(), Admission(paged=True, pages=8, page_rows=4, streams=1, context=16),
                  context=16, prefill_keys=-1)
