"""Admission on rank 0: which request gets a stream and which pages, strictly first come.

The scheduler calls it each round, no threads:

    ticket = adm.request(req_id, prompt_ids, max_tokens)   # or raises Refused at once
    for g in adm.admit_ready():    # FIFO; the head waits for a stream or pages, all behind it too
        send(*g.steps())           # BeginStep (+ CopyStep on windows when resuming)
        prefill from g.resumed_rows
    send(*adm.keep_prompt(req_id, prompt_ids))   # n > 1: the prompt's pages kept, mid-reply
    send(*adm.finish(req_id, written_ids))   # pages back, or kept in the prompt cache; EndStep
    send(*adm.cancel(req_id))                # a waiting request just leaves; a running one ends

A request takes ceil((prompt + max_tokens + verify_window) / page_rows) pages when it
starts (its table never grows), so a running stream can never run out of rows. The head
of the queue blocks the rest: a long request is never starved by short ones. Before the
head waits for pages, the least recently used kept prefixes are evicted.

Emit each call's steps before the next call: on windows a grant copies from cache pages
that a later finish may reuse.

A recurrent family (snap_slots > 0: the plan funds snapshot slots from the prompt cache)
resumes only where the cache keeps its state too: a grant restores the snapshot of the
deepest kept node (SnapStep.RESTORE after BeginStep) and names a pending slot the engine
writes the stream's page-boundary states into (SnapStep.PENDING: the state at the last page
boundary b < the rows written, b > 0). When the stream ends that slot is attached to the
node ending at b (finish), or copied into a fresh slot for the prompt's node while the
stream runs on (keep_prompt, SnapStep.COPY); otherwise it goes back.
"""
from __future__ import annotations

import heapq
from collections import OrderedDict
from dataclasses import dataclass

from server.planner.layout import cdiv
from server.planner.plan import Plan
from server.planner.pool import Pool, PoolCorrupt
from server.planner.prompt_cache import PromptCache
from server.ranks.steps import BeginStep, CopyStep, EndStep, SnapStep


class Refused(ValueError):
    """A request that can never be served; code and message go to the client as they are."""

    def __init__(self, code: str, message: str, **numbers):
        super().__init__(message)
        self.code, self.message, self.numbers = code, message, numbers


@dataclass(frozen=True)
class Ticket:
    req_id: str
    prompt_tokens: int
    max_tokens: int
    pages: int               # the table it will take (0 on windows)
    position: int            # requests ahead of it when it came


@dataclass(frozen=True)
class Grant:
    req_id: str
    stream: int
    page_ids: tuple          # the stream's table: row r in page_ids[r // page_rows]; () on windows
    kept: int                # leading pages shared from the prompt cache (rows already written)
    resumed_rows: int        # rows [0, resumed_rows) are already there: prefill starts here
    copy_from: tuple = ()    # windows: cache pages holding rows [0, resumed_rows)
    restore: int = -1        # snapshot slot holding the recurrent state at resumed_rows
    pending: int = -1        # snapshot slot for the stream's page-boundary states

    @property
    def fresh(self) -> tuple:
        """Pages no row has been written to (NaN-filled first under TF_KV_POISON=1)."""
        return self.page_ids[self.kept:]

    def steps(self) -> list:
        out = [BeginStep(self.stream, self.page_ids, self.kept)]
        if self.copy_from:
            out.append(CopyStep(self.stream, self.copy_from, self.resumed_rows, to_pages=False))
        if self.restore >= 0:
            out.append(SnapStep(SnapStep.RESTORE, self.restore, self.stream, self.resumed_rows))
        if self.pending >= 0:
            out.append(SnapStep(SnapStep.PENDING, self.pending, self.stream))
        return out


@dataclass
class _Waiting:
    ticket: Ticket
    ids: tuple
    resume: bool = True


@dataclass
class _Running:
    stream: int
    table: tuple
    pending: int = -1        # its pending snapshot slot (recurrent families)


class Admission:
    def __init__(self, *, paged: bool, pages: int, page_rows: int, streams: int, context: int,
                 cache_pages: int = 0, verify_window: int = 1, poison: bool = False,
                 snap_slots: int = 0):
        self.paged, self.page_rows, self.streams = paged, page_rows, streams
        self.context, self.verify_window = context, verify_window
        self.pool = Pool(pages, poison)
        self.cache = PromptCache(self.pool, page_rows, cache_pages, snap_slots)
        self._streams = list(range(streams))        # a heap: lowest free stream first
        self._queue: "OrderedDict[str, _Waiting]" = OrderedDict()
        self._running: dict[str, _Running] = {}

    @staticmethod
    def from_plan(plan: Plan, poison: bool = False) -> "Admission":
        return Admission(paged=plan.paged, pages=plan.pool_pages, page_rows=plan.page_rows,
                         streams=plan.streams, context=plan.context, cache_pages=plan.cache_pages,
                         verify_window=plan.verify_window, poison=poison,
                         snap_slots=plan.snap_slots)

    # -- state -----------------------------------------------------------------------------
    @property
    def waiting(self) -> int:
        return len(self._queue)

    @property
    def running(self) -> int:
        return len(self._running)

    def table(self, req_id: str) -> tuple:
        return self._running[req_id].table

    def stream_of(self, req_id: str) -> int:
        return self._running[req_id].stream

    def pages_for(self, prompt_tokens: int, max_tokens: int) -> int:
        return cdiv(prompt_tokens + max_tokens + self.verify_window, self.page_rows)

    # -- the calls -------------------------------------------------------------------------
    def check(self, prompt_tokens: int, max_tokens: int) -> int:
        """Refuse what can never be served, with the numbers; else the pages it will take."""
        m, k, n = prompt_tokens, max_tokens, self.context
        if m < 1:
            raise Refused("invalid_prompt", "The prompt has no tokens")
        if k < 1:
            raise Refused("invalid_max_tokens", f"max_tokens is {k}; it must be at least 1",
                          max_tokens=k)
        if m + k > n:
            raise Refused("context_length_exceeded",
                          f"This server's maximum context length is {n} tokens; the prompt has "
                          f"{m} tokens and max_tokens asks for {k}",
                          context=n, prompt_tokens=m, max_tokens=k)
        pages = self.pages_for(m, k) if self.paged else 0
        if pages > self.pool.total:
            raise Refused("pool_too_small",
                          f"The request needs {pages} pages of {self.page_rows} rows (prompt {m} + "
                          f"max_tokens {k} + verify {self.verify_window}) but the pool holds "
                          f"{self.pool.total}; lower max_tokens",
                          pages=pages, pool=self.pool.total)
        return pages

    def request(self, req_id: str, prompt_ids, max_tokens: int, resume: bool = True) -> Ticket:
        """resume=False: never start from a kept prefix (prompt_logprobs needs every
        prompt row's logits); its rows are still kept at its end for others."""
        if req_id in self._queue or req_id in self._running:
            raise ValueError(f"request {req_id!r} is already admitted or waiting")
        m, k = len(prompt_ids), max_tokens
        pages = self.check(m, k)
        t = Ticket(req_id, m, k, pages, len(self._queue))
        self._queue[req_id] = _Waiting(t, tuple(prompt_ids), resume)
        return t

    def admit_ready(self) -> list:
        """Grants for the requests at the head of the queue that fit now, in order."""
        grants = []
        while self._queue and self._streams:
            req_id, w = next(iter(self._queue.items()))
            g = self._admit(w) if self.paged else self._admit_window(w)
            if g is None:
                break
            del self._queue[req_id]
            grants.append(g)
        return grants

    def finish(self, req_id: str, written_ids) -> list:
        """The request ended; written_ids are the token ids whose rows its stream wrote
        (prompt and reply, in order). Returns the steps to send: on windows a CopyStep
        into the prompt cache first, then EndStep."""
        run = self._running.pop(req_id)
        steps = []
        ids = tuple(written_ids)
        if self.paged:
            self.cache.insert(ids, run.table)
            self.pool.give(run.table)
        else:
            pages, rows = self.cache.insert_copy(ids)
            if rows:
                steps.append(CopyStep(run.stream, pages, rows, to_pages=True))
        if run.pending >= 0:                 # its state at the last page boundary before the end
            self.cache.attach(ids, self._snap_pages(len(ids)), run.pending)
        heapq.heappush(self._streams, run.stream)
        return steps + [EndStep(run.stream)]

    def keep_prompt(self, req_id: str, prompt_ids) -> list:
        """A running request's prompt rows are all written: keep its prompt's full pages in
        the prompt cache now, not at its end, so the other choices of an n > 1 request
        resume from them (pages: shared by reference; windows: rows copied into cache
        pages, the CopyStep returned). Its reply rows never land in those pages."""
        run = self._running.get(req_id)
        if run is None:
            return []
        ids = tuple(prompt_ids)
        steps = []
        if self.paged:
            self.cache.insert(ids, run.table)
        else:
            pages, rows = self.cache.insert_copy(ids)
            if rows:
                steps.append(CopyStep(run.stream, pages, rows, to_pages=True))
        n = self._snap_pages(len(ids))
        if run.pending >= 0 and self.cache.snap_node(ids, n) is not None:
            slot = self.cache.take_slot()    # the pending one runs on: its bytes copied
            if slot >= 0 and self.cache.attach(ids, n, slot):
                steps.append(SnapStep(SnapStep.COPY, run.pending, to=slot))
        return steps

    def cancel(self, req_id: str) -> list:
        """A waiting request leaves the queue; a running one gives its pages back (nothing kept)."""
        if self._queue.pop(req_id, None) is not None:
            return []
        run = self._running.pop(req_id, None)
        if run is None:
            return []
        if self.paged:
            self.pool.give(run.table)
        self.cache.give_slot(run.pending)
        heapq.heappush(self._streams, run.stream)
        return [EndStep(run.stream)]

    # -- inside ----------------------------------------------------------------------------
    def _snap_pages(self, rows: int) -> int:
        """Pages before the last page boundary b < rows (b > 0): where a pending slot's
        state stands once a stream has written `rows` rows (the engine's rule,
        Engine._snap_at)."""
        return (rows - 1) // self.page_rows if rows > 0 else 0

    def _admit(self, w: _Waiting):
        prefix, slot = self.cache.lookup_snap(w.ids) if w.resume else ((), -1)
        fresh = w.ticket.pages - len(prefix)
        self.pool.share(prefix)                     # held now: eviction cannot take them
        if self.pool.free < fresh:
            self.cache.evict_until_free(fresh)
        if self.pool.free < fresh:
            self.pool.give(prefix)
            return None
        table = prefix + self.pool.take(fresh)
        return self._start(w, table, len(prefix), len(prefix) * self.page_rows, (), slot)

    def _admit_window(self, w: _Waiting):
        prefix, slot = self.cache.lookup_snap(w.ids) if w.resume else ((), -1)
        return self._start(w, (), 0, len(prefix) * self.page_rows, prefix, slot)

    def _start(self, w, table, kept, resumed, copy_from, restore=-1) -> Grant:
        stream = heapq.heappop(self._streams)
        # a pending slot may be the one this grant restores from (its snapshot dropped as the
        # least recently used): RESTORE runs at BeginStep, before any round writes the slot
        pending = self.cache.take_slot() if self.cache.snap_slots else -1
        self._running[w.ticket.req_id] = _Running(stream, table, pending)
        return Grant(w.ticket.req_id, stream, table, kept, resumed, copy_from, restore, pending)

    def check_integrity(self) -> None:
        """free + held + kept == total, and every page's refs == the tables holding it."""
        self.pool.check_integrity()
        self.cache.check()
        refs = [0] * self.pool.total
        for run in self._running.values():
            for p in run.table:
                refs[p] += 1
        for p, r in enumerate(refs):
            if self.pool.refs(p) != r:
                raise PoolCorrupt(f"page {p}: {self.pool.refs(p)} refs, {r} tables hold it")
        streams = sorted([r.stream for r in self._running.values()] + self._streams)
        if streams != list(range(self.streams)):
            raise PoolCorrupt(f"streams out of order: {streams}")
        slots = sorted([r.pending for r in self._running.values() if r.pending >= 0]
                       + list(self.cache.slots_free) + list(self.cache.slots_kept))
        if slots != list(range(self.cache.snap_slots)):
            raise PoolCorrupt(f"snapshot slots out of order: {slots} (running, free, kept) "
                              f"of {self.cache.snap_slots}")
