"""A round's grammar masks: made on the mask thread while the ranks run the round, for the
rows that round samples under a grammar and only those; with the driver's batched call
(HostSampling.prepare_masks: llguidance's threads) once a round for all of them, in row
order, and none in a round without such a row. The real-grammar version is
tests/model/test_grammar_many.py; these use a stand-in grammar and run in milliseconds."""
from __future__ import annotations

import threading

from server.planner.admission import Admission
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from test_scheduler_guards import FakeDriver, Loop, Sink, expected, spin, tokens
from test_scheduler_thread_guards import Grammar


class Batched(FakeDriver):
    """Records each batched mask call (the states it was given) and each sampler state."""

    def __init__(self):
        super().__init__()
        self.mask_calls, self.states = [], {}

    def sampler_state(self, params, prompt_ids, salt, **kw):
        st = super().sampler_state(params, prompt_ids, salt, **kw)
        self.states[tuple(prompt_ids)] = st
        return st

    def prepare_masks(self, states):
        self.mask_calls.append((list(states), threading.current_thread().name))
        super().prepare_masks(states)

    def sample(self, row, st):                    # arg-max under the (stand-in) grammar
        tok = int(row.argmax())
        st.record(tok)
        return tok, None, ()


G1, G2, PLAIN = [5, 6, 7], [8, 9], [10, 11, 12, 13]


def run(drv, grammars):
    adm = Admission(paged=True, pages=64, page_rows=4, streams=3, context=64)
    s = Scheduler(drv, adm, context=64, prefill_chunk=16)
    sinks = {}
    for rid, p, g, n in (("g1", G1, grammars[0], 4), ("g2", G2, grammars[1], 4),
                         ("plain", PLAIN, None, 4)):
        sinks[rid] = Sink()
        s.sinks[rid] = (Loop(), sinks[rid])
        s.inbox.put(("new", GenRequest(rid, list(p), SamplingParams(max_tokens=n, temperature=0.0,
                                                                     ignore_eos=True),
                                       grammar=g)))
    spin(s)
    adm.check_integrity()
    return s, sinks


def test_the_batched_call_makes_a_rounds_masks_at_once_for_its_grammar_rows_only():
    drv = Batched()
    g1, g2 = Grammar(2), Grammar(3)                 # complete after 2 and 3 tokens
    s, sinks = run(drv, (g1, g2))
    st1, st2 = drv.states[tuple(G1)], drv.states[tuple(G2)]
    # rounds 1, 2: both grammars' rows; round 3: g2's alone; round 4 (plain alone): no call
    assert [[id(x) for x in states] for states, _ in drv.mask_calls] == [
        [id(st1), id(st2)], [id(st1), id(st2)], [id(st2)]]
    assert all(name.startswith("foldserve-masks") for _, name in drv.mask_calls)
    assert (g1.masks, g2.masks) == (2, 3)           # each grammar's mask made before each token
    assert tokens(sinks["g1"]) == expected(G1, 2) and tokens(sinks["g2"]) == expected(G2, 3)
    assert [sinks[r][-1].finish_reason for r in ("g1", "g2", "plain")] == ["stop", "stop", "length"]
    assert tokens(sinks["plain"]) == expected(PLAIN, 4) and s.rounds == 4
