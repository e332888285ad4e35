"""Run requests through a real Scheduler and Engine, drafts on or off, and collect every
event a client would see: (token id, logprob, top logprobs, finish reason)."""
from __future__ import annotations

import asyncio

from server.drafts.source import make_source
from server.planner.admission import Admission
from server.ranks.steps import PoolStep
from server.requests import GenRequest
from server.scheduler import Scheduler
from server.step_driver import LocalDriver


def serve(engine, reqs, *, draft: bool, paged: bool = True, streams: int = 4,
          context: int = 256, page_rows: int = 4, draft_tokens: int = 8, chunk: int = 16,
          together: bool = True, driver=None, row_cost: float = 0.0, cache_pages: int = 0,
          cached: list | None = None, source: str = "ngram", snap_slots: int = 0,
          poison: bool = False, **sched_kw):
    """reqs: [(prompt ids, SamplingParams, extra GenRequest fields)] -> (events per request,
    the scheduler after it stopped). Every run gets a fresh pool on `engine`. row_cost 0:
    every stream drafts as far as it may (server/drafts/pace.py), the most verify work.
    cache_pages: a prompt cache of that many pages (a later request resumes from an earlier
    one's prompt); `cached`, when given, gets each request's cached prompt tokens.
    source: the draft source's kind (server/drafts/source.py): ngram, or mtp on an engine
    opened with its MTP layer; or a DraftSource object (a test's own). snap_slots: a recurrent family's snapshot slots (its prompt
    cache's states); poison: pages poisoned as they are taken (a read of a row never
    written shows)."""
    vw = draft_tokens + 1 if draft else 1
    rows = context + vw
    pages = ((rows + page_rows - 1) // page_rows * streams if paged else 0) + cache_pages
    adm = Admission(paged=paged, pages=pages, page_rows=page_rows, streams=streams,
                    context=context, verify_window=vw, cache_pages=cache_pages,
                    snap_slots=snap_slots, poison=poison)
    engine.apply(PoolStep(paged, pages, page_rows, (engine.page_bytes(page_rows),), streams,
                          context + vw - 1, verify=vw, snaps=snap_slots, poison=poison))
    s = Scheduler(driver or LocalDriver(engine), adm, context=context, prefill_chunk=chunk,
                  drafts=(make_source(source) if isinstance(source, str) else source) if draft else None, draft_tokens=draft_tokens,
                  draft_row_cost=row_cost, **sched_kw).start()

    async def one(i, prompt, params, extra):
        req = GenRequest(f"r{i}", list(prompt), params, **extra)
        evs = [e async for e in s.generate(req)]
        if cached is not None:
            cached.append(evs[0].cached_tokens)
        return [(e.token_id, e.logprob, e.top_logprobs, e.finish_reason) for e in evs]

    async def run():
        jobs = [(i, *r) if len(r) == 3 else (i, *r, {}) for i, r in enumerate(reqs)]
        if together:
            return list(await asyncio.gather(*(one(*j) for j in jobs)))
        return [await one(*j) for j in jobs]

    try:
        out = asyncio.run(run())
    finally:
        s.stop()
    adm.check_integrity()
    assert adm.pool.free + adm.pool.kept == adm.pool.total
    return out, s
