"""A stream's tokens taken and its end (the scheduler's step 5): each sampled token into
the reply and out to its client; a reply that ended gives its pages back (or keeps its
rows as a prefix) and the ranks hear an EndStep.

sched: the Scheduler whose engine thread calls these (its admission, sinks, metrics and
counters).
"""
from __future__ import annotations

import logging

from server.requests import TokenEvent

log = logging.getLogger("foldserve")


def take(sched, a, tok: int, lp, top, now: float) -> bool:
    """One sampled token into the reply and out to its client; False when it ended the
    reply."""
    sched.generation_tokens_done += 1
    a.out.append(tok)
    reason = finish_reason(a, tok, sched.context)
    plp = None
    if a.first_token_at is None:
        a.first_token_at = now
        if a.req.params.prompt_logprobs is not None:
            plp = tuple(a.prompt_lps)
    sched._emit(a.req.id, TokenEvent(tok, lp, top, None, prompt_tokens=len(a.req.prompt_ids),
                                     cached_tokens=a.cached, prompt_logprobs=plp))
    if reason:
        finish(sched, a, reason)
        return False
    return True


def finish_reason(a, tok: int, context: int) -> str | None:
    p = a.req.params
    if not p.ignore_eos and (tok in a.req.eos_ids or tok in p.stop_token_ids):
        return "stop"
    if a.sampler.done:                   # the grammar is complete (with ignore_eos too)
        return "stop"
    if len(a.out) >= p.max_tokens or a.length >= context:
        return "length"
    return None


def finish(sched, a, reason: str, error: str | None = None, *, status: int = 500,
           code: str | None = None) -> None:
    sched.active.pop(a.req.id, None)
    sched._release(a.req.id)             # (already released once its prompt was written)
    if reason in ("abort", "error"):     # nothing kept from a request that was cut off
        sched._run_all(sched.adm.cancel(a.req.id))
    else:                                # rows written: every fed token (the last sampled one never was)
        sched._run_all(sched.adm.finish(a.req.id, a.ids[: a.fed]))
    sched._emit(a.req.id, TokenEvent(None, finish_reason=reason, error=error,
                                     error_code=status if error else 0, code=code,
                                     prompt_tokens=len(a.req.prompt_ids), cached_tokens=a.cached))
    if sched.metrics:
        sched.metrics.finished(a, reason)


def sampling_failed(sched, a, e: Exception) -> None:
    """One request's sampling raised: it ends alone. A 4xx (its own input, a grammar that
    failed) ends it with that status and code; anything else is a 500 logged with its
    traceback."""
    status = getattr(e, "status", None)
    if isinstance(status, int) and 400 <= status < 500:
        log.info("request %s: %s", a.req.id, e)
        finish(sched, a, "error", f"{e} (after {len(a.out)} tokens)",
               status=status, code=getattr(e, "code", None))
    else:
        log.exception("request %s: sampling", a.req.id)
        finish(sched, a, "error", f"sampling failed: {e}")
