"""prompt_logprobs at the scheduler, on a stand-in engine whose rows depend on the whole
prefix (kv_driver): a request that asks prefills with EVERY_ROW chunks, and the first
token's event carries each prompt token's logprob as the whole prompt's rows give it,
however the prompt is chunked and whatever else shares its rounds; no other event carries
any; such a request never resumes from the prompt cache (its rows are still kept for
others); a failure computing them ends that request alone (500, logged), and the round's
other streams sample as they would have, in the same round. The real-model version is
tests/model/test_prompt_logprobs.py; these run in milliseconds."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from kv_driver import V, KVDriver, next_of, prompt_rows, reply
from server.engine.prompt_logprobs import prompt_logprobs
from server.planner.admission import Admission
from server.ranks.steps import EVERY_ROW, RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from test_scheduler_guards import Loop, Sink, one_pass, spin, tokens

PR, CTX = 4, 64
P = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]          # 11 tokens


def make(cache=0, chunk=4, streams=4, driver=None, paged=True):
    adm = Admission(paged=paged, pages=64 if paged else cache, page_rows=PR, streams=streams,
                    context=CTX, cache_pages=cache)
    drv = driver or KVDriver(paged, PR, CTX)
    return Scheduler(drv, adm, context=CTX, prefill_chunk=chunk), drv, adm


def send(s, rid, prompt, max_tokens, **kw):
    sink = Sink()
    s.sinks[rid] = (Loop(), sink)
    kw.setdefault("temperature", 0.0)
    s.inbox.put(("new", GenRequest(rid, list(prompt), SamplingParams(max_tokens=max_tokens, **kw))))
    return sink


def whole(prompt, k):
    """Each prompt token's (id, logprob, rank, top k) from the whole prompt's rows at once."""
    return tuple(prompt_logprobs(prompt_rows(prompt), 0, prompt[1:], k))


def test_prompt_logprobs_are_the_whole_prompts_rows_however_it_is_chunked_and_shared():
    s, drv, adm = make(chunk=4)
    d = send(s, "d", [40, 41], 8)                         # decodes in every round below
    one_pass(s)
    lp = send(s, "lp", P, 3, prompt_logprobs=3)           # 11 rows: chunks of 4, 4, 3 ...
    q = send(s, "q", [50, 51, 52, 53, 54, 55, 56], 3)     # ... prefilling after it
    spin(s)
    for sink, prompt, n in ((d, [40, 41], 8), (lp, P, 3), (q, [50, 51, 52, 53, 54, 55, 56], 3)):
        assert tokens(sink) == reply(prompt, n) and sink[-1].finish_reason == "length"
    first = [e for e in lp if e.finish_reason is None][0]
    assert first.prompt_logprobs == whole(P, 3) and len(first.prompt_logprobs) == len(P) - 1
    assert all(e.prompt_logprobs is None for e in lp if e is not first)
    assert all(e.prompt_logprobs is None for e in d + q)  # asked by nobody else
    chunks = [c for st in drv.steps if isinstance(st, RoundStep) for c in st.chunks]
    stream = {c.tokens[0]: c.stream for c in chunks if c.start == 0}     # by first prompt token
    lp_prefill = [c for c in chunks if c.stream == stream[P[0]] and c.start < len(P)]
    assert [len(c.tokens) for c in lp_prefill] == [4, 4, 3]             # beside d's decodes, before q's chunks
    assert all(c.logits == EVERY_ROW for c in lp_prefill)
    assert all(c.logits != EVERY_ROW for c in chunks if c.stream != stream[P[0]])
    adm.check_integrity()


@pytest.mark.parametrize("paged", [True, False], ids=["pages", "windows"])
def test_a_prompt_logprobs_request_never_resumes_but_its_rows_are_kept_for_others(paged):
    s, drv, adm = make(cache=16, chunk=16, paged=paged)
    lp1 = send(s, "lp1", P, 2, prompt_logprobs=1)          # a cold cache
    spin(s)
    b = send(s, "b", P, 2)                                  # resumes from lp1's kept rows
    spin(s)
    lp2 = send(s, "lp2", P, 2, prompt_logprobs=1)          # the cache holds P: not used
    spin(s)
    assert b[-1].cached_tokens == 8
    for lp in (lp1, lp2):
        assert all(e.cached_tokens == 0 for e in lp)        # every prompt row computed
        first = [e for e in lp if e.finish_reason is None][0]
        assert first.prompt_logprobs == whole(P, 1)
    assert tokens(lp1) == tokens(b) == tokens(lp2) == reply(P, 2)
    adm.check_integrity()


class HostSamples(KVDriver):
    """Host sampling gives the arg-max + 2 (so a row sampled there, not by the arg-max,
    shows); the prompt logprobs of a request asking for 5 of them fail."""

    def sample(self, row, st):
        tok = (int(np.asarray(row).argmax()) + 2) % V
        st.record(tok)
        return tok, None, ()

    def prompt_logprobs(self, logits, first, targets, k):
        if k == 5:
            raise RuntimeError("planted")
        return super().prompt_logprobs(logits, first, targets, k)


def shifted(prompt, n, shift):
    ids, out = list(prompt), []
    for _ in range(n):
        out.append((next_of(ids) + shift) % V)
        ids.append(out[-1])
    return out


def test_failed_prompt_logprobs_end_that_request_alone_and_delay_no_other_stream(caplog):
    s, drv, adm = make(chunk=16, driver=HostSamples(True, PR, CTX))
    bad = send(s, "bad", [1, 2, 3, 4, 5], 3, prompt_logprobs=5)      # rows: bad, g, h
    g = send(s, "g", [6, 7, 8], 3)                                      # greedy: the arg-max
    h = send(s, "h", [9, 10], 3, temperature=0.9, seed=3)               # the host's sampler
    with caplog.at_level(logging.ERROR, logger="foldserve"):
        one_pass(s)
        assert len(tokens(g)) == len(tokens(h)) == 1                    # in the same round
        spin(s)
    assert [(e.token_id, e.finish_reason, e.error_code, e.error) for e in bad] == [
        (None, "error", 500, "prompt logprobs failed: planted")]
    assert tokens(g) == reply([6, 7, 8], 3) and tokens(h) == shifted([9, 10], 3, 2)
    assert s.rounds == 3
    logged = [r for r in caplog.records if r.getMessage() == "request bad: prompt logprobs"]
    assert len(logged) == 1 and logged[0].exc_info
    assert adm.running == 0 and adm.pool.held == 0
    adm.check_integrity()
