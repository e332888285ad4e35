"""Sampling and verifying a round that ran (the scheduler's step 4): each chunk's rows of
the round's logits, in the round's order. A prefill chunk's rows give prompt logprobs
(where asked) and its last row the first token; a decode chunk's row its next token; a
verify chunk's rows are walked as plain decoding would draw them (server/drafts/verify.py).
Greedy rows take the round's arg-maxes; on GPUs the sampled rows of a round are drawn in
one launch (a failed launch samples that round on the host). One request's failure ends
that request alone (finishing.sampling_failed).

sched: the Scheduler whose engine thread calls this.
"""
from __future__ import annotations

import logging
import time

from server.drafts.verify import verify_walk
from server.ranks.steps import EVERY_ROW

from server import finishing

log = logging.getLogger("foldserve")


def take_round(sched, rnd, logits) -> None:
    """Every token the round `rnd` (round_build.Round) draws, taken (finishing.take)."""
    chunks, owners, samples, drafted = rnd.chunks, rnd.owners, rnd.samples, rnd.drafted
    sampling = sched.sampling
    snap_rows = getattr(sched, "snap_rows", None)     # a recurrent family (round_build)
    first, srow = rnd.rows()
    now = time.monotonic()
    drawers = [(srow[i], owners[i]) for i in range(len(chunks)) if samples[i] and not drafted[i]]
    plain = [a.sampler.plain_greedy for _, a in drawers]
    best = drawn = None
    if hasattr(logits, "sample_rows") and not all(plain):
        # GPU rounds: every drawing row's token in one launch (penalties, bias, masks on the device)
        try:
            rows = [r for r, _ in drawers]
            drawn = dict(zip(rows, logits.sample_rows(rows, [a.sampler for _, a in drawers],
                                                      [len(a.out) for _, a in drawers])))
        except Exception:                # the launch itself failed (a row's own inputs
            log.exception("device sampling; this round samples on the host")   # end
            drawn = None                 # that row alone: logits.device_args)
    if (drawn is None and any(plain)) or any(d and a.sampler.plain_greedy
                                             for d, a in zip(drafted, owners)):
        best = sampling.argmax_rows(logits)   # greedy: arg-max where they lie
    k = -1                               # the drawer's index
    for i, (c, a) in enumerate(zip(chunks, owners)):
        if drafted[i]:                   # a verify chunk: its rows in order (after a replay's)
            verify(sched, a, logits, first[i] + a.fed - c.start, drafted[i], best, now)
            if snap_rows:                # drafts refused: the state rolls back to the start
                a.replay = c.start if a.fed < c.start + len(c.tokens) else None
            continue
        if c.logits == EVERY_ROW:        # rows of prompt positions p predict token p + 1
            n_lp = min(len(c.tokens), len(a.req.prompt_ids) - 1 - c.start)
            try:
                a.prompt_lps += sampling.prompt_logprobs(
                    logits, first[i], a.req.prompt_ids[c.start + 1:c.start + 1 + n_lp],
                    a.req.params.prompt_logprobs)
            except Exception as e:       # one request's bug ends it alone
                log.exception("request %s: prompt logprobs", a.req.id)
                a.fed += len(c.tokens)
                k += samples[i]
                finishing.finish(sched, a, "error", f"prompt logprobs failed: {e}")
                continue
        a.fed = c.start + len(c.tokens)
        a.replay = None
        if a.req.id in sched.held and not a.prefilling:   # n > 1: its prompt is written
            sched._run_all(sched.adm.keep_prompt(a.req.id, a.req.prompt_ids))
            sched._release(a.req.id)
        if not samples[i]:
            continue
        k += 1
        row = srow[i]
        try:
            if drawn is not None:
                tok, lp, top = sampling.drawn(drawn[row], a.sampler, logits, row)
            elif plain[k]:
                tok, lp, top = best[row], None, ()
                a.sampler.record(tok)
            else:
                tok, lp, top = sampling.sample(logits[row], a.sampler)
        except Exception as e:           # a bug in one request's sampling ends it alone
            finishing.sampling_failed(sched, a, e)
            continue
        finishing.take(sched, a, tok, lp, top, now)


def verify(sched, a, logits, first: int, drafts: tuple, best, now: float) -> None:
    """A verify chunk's tokens (server/drafts/verify.py), each taken as a decode's would
    be, until one is not the next draft or ends the reply; the stream's valid rows then
    end at the last draft taken."""
    taken = accepted = 0
    try:
        for tok, lp, top in verify_walk(sched.sampling, a.sampler, logits, first, drafts, best):
            accepted += taken < len(drafts) and tok == drafts[taken]
            taken += 1
            a.fed += 1                   # the row whose token this is, a valid row
            if not finishing.take(sched, a, tok, lp, top, now):
                break
    except Exception as e:               # a bug in one request's sampling ends it alone
        if a.req.id in sched.active:
            finishing.sampling_failed(sched, a, e)
    a.drafts.verified(len(drafts), accepted)
    sched.draft_tokens_done += len(drafts)
    sched.accepted_tokens_done += accepted
    if sched.metrics is not None and hasattr(sched.metrics, "drafted"):
        sched.metrics.drafted(len(drafts), accepted)
