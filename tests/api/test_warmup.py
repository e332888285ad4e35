"""serve's warm-up request: one small greedy request through the scheduler before the
server says it is ready (the CPU kernels compile on the first round), logged with its time."""
from __future__ import annotations

import logging

from api_fakes import FakeScheduler
from server.warmup import NEW_TOKENS, PROMPT_TOKENS, warm_up


def test_warm_up_runs_one_request_to_its_end_and_says_how_long(caplog):
    sched = FakeScheduler(eos_after=0)          # eos first: ignore_eos still runs every round
    with caplog.at_level(logging.INFO, logger="foldserve"):
        seconds = warm_up(sched, vocab=50, what="the CPU kernels")
    (req,) = sched.started
    assert len(req.prompt_ids) == PROMPT_TOKENS and all(0 <= t < 50 for t in req.prompt_ids)
    assert req.params.max_tokens == NEW_TOKENS and req.params.ignore_eos
    assert req.params.temperature == 0.0
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0].startswith("warming up the CPU kernels")
    assert lines[-1] == f"warm in {seconds:.1f} s: the CPU kernels are ready, the first " \
        "request runs as fast as the second"


def test_a_failed_warm_up_is_logged_not_raised(caplog):
    sched = FakeScheduler(fail_after=0)
    with caplog.at_level(logging.INFO, logger="foldserve"):
        warm_up(sched, vocab=50)
    assert "warm-up request ended early (error: rank 1 is gone)" in caplog.records[-1].getMessage()
