"""A round's sampling, through the driver it is given: greedy rows take the arg-max, rows
that need only their seed are drawn where the logits lie (logits.sample_rows, a GPU round),
the rest go to driver.sample; each token is recorded in its own sampler; the token budget
is shared by decodes and prefill; metrics hear each round and each first token."""
from __future__ import annotations

import logging
from collections import Counter

import numpy as np

from server.planner.admission import Admission
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


def test_each_row_is_sampled_where_its_settings_say_and_recorded_in_its_own_sampler():
    DRAWN.clear()
    drv = Device()
    s, sinks = run(drv, "gdh")
    g, d, h = (tokens(sinks[r]) for r in "gdh")
    assert g == expected(PG, 3)                              # greedy: the arg-max
    assert d == chain(PD, 3, lambda k: 1 + k)                # drawn on the device
    assert h == chain(PH, 3, lambda k: 2)                    # the host's sampler
    assert [(e.logprob, e.top_logprobs) for e in sinks["d"][:-1]] == [(None, ())] * 3
    assert [(e.logprob, e.top_logprobs) for e in sinks["h"][:-1]] == [(-0.5, ((t, -0.5),)) for t in h]
    # one draw a round, for d's row alone (row 1 of g, d, h), with the tokens d has so far
    st = drv.states
    assert DRAWN == [([1], [st[tuple(PD)]], [k]) for k in range(3)]
    for p, toks in ((PG, g), (PD, d), (PH, h)):
        assert st[tuple(p)].counts == Counter(toks) and st[tuple(p)].produced == 3
    assert drv.argmax_calls == 3 and s.rounds == 3


def test_a_round_without_a_greedy_row_asks_for_no_arg_max():
    DRAWN.clear()
    drv = Device()
    s, sinks = run(drv, "dh")
    assert tokens(sinks["d"]) == chain(PD, 3, lambda k: 1 + k)
    assert tokens(sinks["h"]) == chain(PH, 3, lambda k: 2)
    assert drv.argmax_calls == 0 and DRAWN == [([0], [drv.states[tuple(PD)]], [k]) for k in range(3)]


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
        self.fed, self.first = [], []

    def admitted(self, req, wait, resumed):
        pass

    def iteration(self, fed):
        self.fed.append(fed)

    def finished(self, a, reason):
        self.first.append(isinstance(a.first_token_at, float) and a.first_token_at >= a.admitted_at)


def test_metrics_hear_the_tokens_of_each_round_and_each_first_token():
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64)
    m = Metrics()
    s = Scheduler(FakeDriver(), adm, context=64, prefill_chunk=2, metrics=m)
    submit(s, "a", [1, 2, 3, 4, 5], 3)
    spin(s)
    assert m.fed == [2, 2, 1, 1, 1] and m.first == [True]


def test_a_failed_sampling_is_logged_and_delays_no_other_stream(caplog):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=2, context=64)
    s = Scheduler(BadSample(), adm, context=64, prefill_chunk=16)
    bad = Sink()
    s.sinks["bad"] = (Loop(), bad)
    s.inbox.put(("new", GenRequest("bad", [1, 2, 3], SamplingParams(max_tokens=3, temperature=0.9))))
    good = submit(s, "good", [4, 5, 6], 3)
    with caplog.at_level(logging.ERROR, logger="foldserve"):
        spin(s)
    assert bad[-1].finish_reason == "error" and tokens(good) == expected([4, 5, 6], 3)
    assert s.rounds == 3                           # good's 3 tokens in 3 rounds, as alone
    logged = [r for r in caplog.records if r.getMessage() == "request bad: sampling"]
    assert len(logged) == 1 and logged[0].exc_info
