"""Continuous batching on rank 0: admit, build one Step a round, run it, sample, stream.

The engine runs in one thread of its own; the front end talks to it through an inbox
(requests, cancellations) and per-request asyncio queues (token events). Each round:

    1. take new requests and cancellations from the inbox
    2. admit what the planner can fund (FIFO; a request that waits blocks those behind it)
       -> BeginStep (and CopyStep to restore a kept prefix on windows)
    3. one RoundStep: every decoding stream's next token, then prefill chunks under the
       token budget (a round no stream decodes in may give a prompt `solo_chunk` tokens; a
       round others decode in holds its prefill chunks' attention reads to `prefill_keys`,
       so a long prompt interleaves with their decodes in small rounds: `prefill_take`)
       (with drafts: a decoding stream's chunk is its last token and its drafts,
       server/drafts/policy.py says how many)
    4. run it on every rank; sample rank 0's logits (a verify chunk's rows in order,
       server/drafts/verify.py); stream the tokens
    5. streams that ended -> finish (pages back, or kept as a prefix) -> EndStep

A shutdown (server/api/drain.py) closes admission with `stop_admitting`: every request
still waiting, and any that arrives later, ends at once with a 503 `shutting_down`; the
running ones go on until they finish or `end_running` ends them with the same error.

n > 1: choices 1.. of a request (GenRequest.follows names choice 0) are held until choice
0's prompt is prefilled; then its prompt's full pages go into the prompt cache
(Admission.keep_prompt) and the held choices enter admission, resuming from them: the
prompt is prefilled once, each choice only its last part page (at least one token, as any
resumed request). Resumed == fresh, so each choice is what a single request would be.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

from server.drafts.pace import Paced
from server.drafts.policy import ROW_COST, round_drafts
from server.drafts.verify import verify_walk
from server.requests import SHUTTING_DOWN, GenRequest, TokenEvent
from server.ranks.rank_errors import RankError
from server.ranks.steps import EVERY_ROW, Chunk, RoundStep

log = logging.getLogger("foldserve")


@dataclass
class Active:
    req: GenRequest
    stream: int
    page_ids: tuple
    fed: int                       # rows written so far (prompt rows, then reply rows)
    sampler: object                  # the driver's sampler_state(): server/engine/sampler.py
    out: list = field(default_factory=list)
    cached: int = 0
    first_token_at: float | None = None
    admitted_at: float = 0.0
    prompt_lps: list = field(default_factory=list)   # prompt_logprobs so far (server/engine/prompt_logprobs.py)
    drafts: object = None            # its StreamDrafts (server/drafts/source.py), or None: plain

    @property
    def ids(self) -> list:
        return self.req.prompt_ids + self.out

    def token_at(self, i: int) -> int:
        """ids[i] without building ids (a decode round asks every stream for one token)."""
        n = len(self.req.prompt_ids)
        return self.req.prompt_ids[i] if i < n else self.out[i - n]

    @property
    def length(self) -> int:
        return len(self.req.prompt_ids) + len(self.out)

    @property
    def prefilling(self) -> bool:
        return self.fed < len(self.req.prompt_ids)


KEYS_FLOOR = 64                    # prompt tokens a round gives a prefilling stream at least


def prefill_take(fed: int, left: int, cap: int, keys: int | None) -> int:
    """Prompt tokens to prefill this round for a stream with `fed` rows written and `left`
    to go: at most `cap` (its chunk, within the round's token budget) and, where `keys` is
    given (streams decode in this round), at most the n whose rows read n (fed + n) keys
    or fewer, the chunk's attention work; never under KEYS_FLOOR (nor over cap) so a long
    prompt still advances. Scheduling only: a row's bytes do not depend on its chunk."""
    n = min(cap, left)
    if keys is not None and n * (fed + n) > keys:
        lo, hi = 0, n                                # the largest n with n (fed + n) <= keys
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if mid * (fed + mid) <= keys:
                lo = mid
            else:
                hi = mid - 1
        n = min(n, max(lo, KEYS_FLOOR))
    return max(n, 0)


class Scheduler:
    IDLE_TICK_S = 0.5          # an idle engine wakes this often to check the ranks (driver.check)
    STOP_WAIT_S = 30.0         # stop() waits this long for the engine thread (a stuck step)

    def __init__(self, driver, admission, *, context: int, prefill_chunk: int = 256,
                 token_budget: int | None = None, seed_salt: int = 0, metrics=None,
                 solo_chunk: int | None = None, prefill_keys: int | None = None,
                 drafts=None, draft_tokens: int = 0, draft_rows: int | None = None,
                 draft_row_cost: float = ROW_COST["cpu"]):
        self.driver, self.adm = driver, admission
        self.context, self.prefill_chunk = context, prefill_chunk
        self.token_budget = token_budget or max(prefill_chunk, 64)
        # rounds no stream decodes in: a prompt's chunk (None: prefill_chunk); rounds others
        # decode in: the prefill chunks' attention reads at most (None: no bound)
        self.solo_chunk = max(solo_chunk or prefill_chunk, prefill_chunk)
        if prefill_keys is not None and prefill_keys < 0:
            raise ValueError(f"prefill_keys {prefill_keys}: 0 or more (0: no bound)")
        self.prefill_keys = prefill_keys or None
        self.seed_salt, self.metrics = seed_salt, metrics
        # drafts (server/drafts/): the source (None: off), tokens a stream drafts at most,
        # and the rows a round may hold before drafting backs off (policy.round_drafts)
        self.draft_source, self.draft_tokens = drafts, draft_tokens
        self.draft_row_cost = draft_row_cost     # server/drafts/pace.py
        self.draft_rows = draft_rows if draft_rows is not None else draft_tokens + 1
        if drafts is not None and self.adm.verify_window < draft_tokens + 1:
            raise ValueError(f"drafts of {draft_tokens} tokens need a verify window of "
                             f"{draft_tokens + 1} rows; admission reserves {self.adm.verify_window}")
        self.draft_tokens_done = 0           # tokens drafted, and of them accepted
        self.accepted_tokens_done = 0
        self.inbox: queue.Queue = queue.Queue()
        self.active: dict[str, Active] = {}
        self.sinks: dict[str, tuple] = {}        # req id -> (loop, asyncio.Queue)
        self.waiting: dict[str, GenRequest] = {}
        self.held: dict[str, list] = {}      # choice 0's id -> choices waiting for its prefill
        self.error: str | None = None
        self.error_code: str | None = None   # the API code of self.error: rank_lost, or None
        self.cause: str | None = None        # what stopped the engine loop (self.error's core)
        self.closed: str | None = None       # stop_admitting's message: nothing new is admitted
        self.rounds = 0
        self.prompt_tokens_done = 0          # prompt tokens prefilled, all requests (stats line)
        self.generation_tokens_done = 0      # tokens sampled, all requests
        self._steps = 0                      # steps sent; the idle check runs once per change
        self._checked = -1
        self._stop = threading.Event()
        self._host = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="foldserve-masks")
        self._thread = threading.Thread(target=self._run, name="foldserve-engine", daemon=True)

    # ---- front end side (any thread / the event loop) ----
    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self.inbox.put(("wake", None))
        self._thread.join(timeout=self.STOP_WAIT_S)
        self._host.shutdown(wait=False)
        self.driver.close()

    def check(self, prompt_len: int, max_tokens: int) -> None:
        """Raise planner.admission.Refused (code, message, status 400) for what can never fit."""
        self.adm.check(prompt_len, max_tokens)

    async def generate(self, req: GenRequest):
        loop = asyncio.get_running_loop()
        q: asyncio.Queue = asyncio.Queue()
        if self.error:
            yield TokenEvent(None, finish_reason="error", error=self.error, error_code=503,
                             code=self.error_code)
            return
        req.arrival = req.arrival or time.monotonic()
        self.sinks[req.id] = (loop, q)
        self.inbox.put(("new", req))
        finished = False
        try:
            while True:
                ev = await q.get()
                yield ev
                if ev.finish_reason is not None:
                    finished = True
                    return
        finally:
            if not finished:               # the client left: free its stream by the next round
                self.cancel(req.id)

    def cancel(self, req_id: str) -> None:
        self.inbox.put(("cancel", req_id))

    def stop_admitting(self, message: str) -> None:
        """Shutting down: the waiting requests, and every later one, end now with a 503
        `shutting_down` error (`message`); the running ones go on."""
        self.inbox.put(("close", message))

    def end_running(self, message: str) -> None:
        """Shutting down: end every running request now with a 503 `shutting_down` error."""
        self.inbox.put(("end", message))

    def stats(self) -> dict:
        pool = self.adm.pool
        lost = getattr(self.driver, "failure", None) or self.cause
        return {"ranks": self.driver.ranks, "ranks_ok": self.driver.ok and self.error is None,
                "lost": str(lost) if lost else None,     # what ended the group, once known
                "streams_busy": len(self.active), "streams_total": self.adm.streams,
                "queue": len(self.waiting), "context": self.context, "rounds": self.rounds,
                "pages_total": pool.total, "pages_free": pool.free, "pages_kept": pool.kept,
                "paged": self.adm.paged, "page_rows": self.adm.page_rows, "error": self.error,
                "cache_pages": self.adm.cache.budget,
                "prompt_tokens_done": self.prompt_tokens_done,
                "generation_tokens_done": self.generation_tokens_done,
                "draft_tokens_done": self.draft_tokens_done,
                "accepted_tokens_done": self.accepted_tokens_done}

    # ---- engine thread ----
    def _emit(self, req_id: str, ev: TokenEvent) -> None:
        sink = self.sinks.get(req_id)
        if sink is None:
            return
        loop, q = sink
        if ev.finish_reason is not None:
            self.sinks.pop(req_id, None)
        try:
            loop.call_soon_threadsafe(q.put_nowait, ev)
        except RuntimeError:               # its event loop is gone
            pass

    def _run(self):
        try:
            while not self._stop.is_set():
                busy = bool(self.active or self.waiting)
                self._drain(block=not busy)
                if self._stop.is_set():
                    break
                self._admit()
                if self.active:
                    self._round()
                elif not self.waiting:
                    if self._checked != self._steps:   # once per change, not every idle tick
                        self.adm.check_integrity()
                        self._checked = self._steps
                    self.driver.check()          # a follower gone while idle is noticed now
        except Exception as e:               # a rank is gone, or a bug: nobody hangs
            # the heartbeat's or watchdog's verdict where there is one: on NCCL the step
            # itself then fails with the communicator's abort, which says less
            cause = getattr(self.driver, "failure", None) or e
            if isinstance(cause, RankError):   # one line; the traceback only at debug
                log.error("engine loop stopped: %s", cause)
                log.debug("engine loop stopped", exc_info=True)
                self.error_code = "rank_lost"
            else:
                log.exception("engine loop stopped")
            self.cause = str(cause)
            self.error = f"the engine stopped: {cause}; restart the ranks"
            self.driver.ok = False
            for rid in list(self.active) + list(self.waiting):
                self._emit(rid, TokenEvent(None, finish_reason="error", error=self.error,
                                           error_code=503, code=self.error_code))
            self.active.clear()
            self.waiting.clear()
            self.held.clear()
            while not self._stop.is_set():   # answer what still arrives, until stop() wakes it
                kind, x = self.inbox.get()
                if kind == "new":
                    self._emit(x.id, TokenEvent(None, finish_reason="error", error=self.error,
                                                error_code=503, code=self.error_code))

    def _drain(self, block: bool):
        try:
            item = self.inbox.get(timeout=self.IDLE_TICK_S) if block else self.inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            kind, x = item
            if kind == "new":
                self._submit(x)
            elif kind == "cancel":
                self._cancel(x)
            elif kind == "close":
                self._close(x)
            elif kind == "end":
                for a in list(self.active.values()):
                    self._finish(a, "error", x, status=503, code=SHUTTING_DOWN)
            try:
                item = self.inbox.get_nowait()
            except queue.Empty:
                return

    def _close(self, message: str) -> None:
        self.closed = message
        for rid in list(self.waiting):
            req = self.waiting.pop(rid)
            self._run_all(self.adm.cancel(rid))
            self._refuse(req)
        self.held.clear()

    def _refuse(self, req: GenRequest) -> None:
        self._emit(req.id, TokenEvent(None, finish_reason="error", error=self.closed,
                                      error_code=503, code=SHUTTING_DOWN))

    def _submit(self, req: GenRequest):
        if self.closed is not None:
            self._refuse(req)
            return
        lead = req.follows
        if lead is not None and self._prefilling(lead):
            self.held.setdefault(lead, []).append(req)
            self.waiting[req.id] = req       # answered like any waiting one should all fail
            return
        self._enqueue(req)

    def _prefilling(self, req_id: str) -> bool:
        """Waiting, or running with prompt rows still to write."""
        if req_id in self.waiting:
            return True
        a = self.active.get(req_id)
        return a is not None and a.prefilling

    def _release(self, lead: str) -> None:
        """Choice 0's prompt is written (or it ended): its held choices enter admission."""
        for req in self.held.pop(lead, ()):
            if self.waiting.pop(req.id, None) is not None:
                self._enqueue(req)

    def _enqueue(self, req: GenRequest):
        try:
            self.adm.request(req.id, req.prompt_ids, req.params.max_tokens,
                             resume=req.params.prompt_logprobs is None)
        except Exception as e:
            self._emit(req.id, TokenEvent(None, finish_reason="error", error=str(e),
                                          error_code=getattr(e, "status", 400)))
            return
        self.waiting[req.id] = req

    def _cancel(self, req_id: str):
        if req_id in self.waiting:
            req = self.waiting.pop(req_id)
            if req.follows in self.held and req in self.held[req.follows]:
                self.held[req.follows].remove(req)
            self._release(req_id)
            self._run_all(self.adm.cancel(req_id))
            self._emit(req_id, TokenEvent(None, finish_reason="abort"))
        elif req_id in self.active:
            self._finish(self.active[req_id], "abort")

    def _admit(self):
        for g in self.adm.admit_ready():
            # listed as waiting until it is active: should anything here raise, the loop's
            # handler still answers it (a request in neither list would hang its client)
            req = self.waiting[g.req_id]
            try:
                st = self.driver.sampler_state(req.params, req.prompt_ids, self.seed_salt,
                                               grammar=req.grammar, eos_ids=req.eos_ids)
            except Exception as e:           # this request's own settings: end it alone
                log.exception("request %s: sampler", req.id)
                del self.waiting[req.id]
                self._run_all(self.adm.cancel(req.id))
                self._release(req.id)
                self._emit(req.id, TokenEvent(None, finish_reason="error", error_code=500,
                                              error=f"the sampler refused this request: {e}"))
                continue
            a = Active(req, g.stream, tuple(g.page_ids), g.resumed_rows, st,
                       cached=g.resumed_rows, admitted_at=time.monotonic(),
                       drafts=self._drafts_for(req, st))
            self._run_all(g.steps())         # BeginStep (+ CopyStep restoring a kept prefix)
            del self.waiting[req.id]
            self.active[req.id] = a
            if self.metrics:
                self.metrics.admitted(req, a.admitted_at - req.arrival, g.resumed_rows)

    def _drafts_for(self, req: GenRequest, st):
        """The stream's drafts: None with drafting off, for a request that says
        "draft": false, or where the driver cannot draw its verify rows as plain would."""
        if self.draft_source is None or not req.draft or not self.driver.verifies(st):
            return None
        return Paced(self.draft_source.stream(req.prompt_ids), self.draft_row_cost)

    def _run_all(self, steps):
        for st in steps:
            self.driver.run(st)
            self._steps += 1

    def _round(self):
        budget = self.token_budget
        chunks, owners, samples = [], [], []   # samples[c]: the chunk's last row draws a token
        drafted = []                         # drafted[c]: its drafts (a verify chunk), or ()
        dec = [a for a in self.active.values() if not a.prefilling]
        guesses = round_drafts(
            [(a.drafts, a.out, min(a.req.params.max_tokens - len(a.out), self.context - a.length))
             for a in dec], self.draft_tokens, min(self.draft_rows, budget),
            len(dec) < len(self.active)) if self.draft_source is not None else [()] * len(dec)
        for a, d in zip(dec, guesses):       # decodes first: one token each, and its drafts
            chunks.append(Chunk(a.stream, a.fed, (a.token_at(a.fed), *d), EVERY_ROW if d else True))
            owners.append(a)
            samples.append(True)
            drafted.append(d)
            budget -= 1 + len(d)
        decoding = bool(chunks)
        cap = self.prefill_chunk if decoding else self.solo_chunk
        keys = self.prefill_keys if decoding else None
        for a in self.active.values():       # then prefill chunks under the budget
            if a.prefilling and budget > 0 and (keys is None or keys > 0):
                n = prefill_take(a.fed, len(a.req.prompt_ids) - a.fed, min(cap, budget), keys)
                if keys is not None:
                    keys -= n * (a.fed + n)
                last = a.fed + n == len(a.req.prompt_ids)
                # prompt_logprobs: every prompt row's logits, the last one's also the draw's
                want = EVERY_ROW if a.req.params.prompt_logprobs is not None else last
                chunks.append(Chunk(a.stream, a.fed, tuple(a.req.prompt_ids[a.fed:a.fed + n]), want))
                owners.append(a)
                samples.append(last)
                drafted.append(())
                budget -= n
        # grammar masks for the rows this round samples: on the host while the ranks run it
        shaped = [a.sampler for a, d in zip(owners, samples) if d and a.sampler.constraint is not None]
        prep = getattr(self.driver, "prepare_masks", None)   # all at once (llguidance's threads)
        masks = ([self._host.submit(prep, shaped)] if prep is not None else
                 [self._host.submit(s.prepare) for s in shaped]) if shaped else []
        try:
            logits = self.driver.run(RoundStep(tuple(chunks)))
        finally:
            for f in masks:
                f.exception()                # wait; a failure shows again when sampling
        self.rounds += 1
        self._steps += 1
        fed = sum(len(c.tokens) for c in chunks)
        self.prompt_tokens_done += sum(len(c.tokens) for c, a in zip(chunks, owners) if a.prefilling)
        if self.metrics is not None and hasattr(self.metrics, "iteration"):
            self.metrics.iteration(fed)
        # the logits' rows: a chunk gives none, its last row's, or every row's (EVERY_ROW)
        first, srow, o = [], [], 0
        for c in chunks:
            first.append(o)
            o += len(c.tokens) if c.logits == EVERY_ROW else int(bool(c.logits))
            srow.append(o - 1)
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
            best = self.driver.argmax_rows(logits)   # greedy: arg-max where they lie
        k = -1                               # the drawer's index
        for i, (c, a) in enumerate(zip(chunks, owners)):
            if drafted[i]:                   # a verify chunk: its rows in order
                self._verify(a, logits, first[i], drafted[i], best, now)
                continue
            if c.logits == EVERY_ROW:        # rows of prompt positions p predict token p + 1
                n_lp = min(len(c.tokens), len(a.req.prompt_ids) - 1 - c.start)
                try:
                    a.prompt_lps += self.driver.prompt_logprobs(
                        logits, first[i], a.req.prompt_ids[c.start + 1:c.start + 1 + n_lp],
                        a.req.params.prompt_logprobs)
                except Exception as e:       # one request's bug ends it alone
                    log.exception("request %s: prompt logprobs", a.req.id)
                    a.fed += len(c.tokens)
                    k += samples[i]
                    self._finish(a, "error", f"prompt logprobs failed: {e}")
                    continue
            a.fed += len(c.tokens)
            if a.req.id in self.held and not a.prefilling:   # n > 1: its prompt is written
                self._run_all(self.adm.keep_prompt(a.req.id, a.req.prompt_ids))
                self._release(a.req.id)
            if not samples[i]:
                continue
            k += 1
            row = srow[i]
            try:
                if drawn is not None:
                    tok, lp, top = self.driver.drawn(drawn[row], a.sampler, logits, row)
                elif plain[k]:
                    tok, lp, top = best[row], None, ()
                    a.sampler.record(tok)
                else:
                    tok, lp, top = self.driver.sample(logits[row], a.sampler)
            except Exception as e:           # a bug in one request's sampling ends it alone
                self._sampling_failed(a, e)
                continue
            self._take(a, tok, lp, top, now)
        if getattr(self.draft_source, "engine_pass", False):
            self._after_round(chunks, owners)

    def _after_round(self, chunks, owners) -> None:
        """A source that runs on the ranks (MTP, server/drafts/mtp.py): each stream still
        running gets the rows this round made valid (from its chunk's start to its rows
        written, each with the token after it) and, where it drafts, as many guesses as its
        pace will ask for next round."""
        entries, o = [], 0
        for c, a in zip(chunks, owners):
            src, o = o, o + len(c.tokens)
            if a.req.id not in self.active or a.fed <= c.start:
                continue
            depth, src_drafts = 0, None
            if a.drafts is not None and not a.prefilling:
                left = min(a.req.params.max_tokens - len(a.out), self.context - a.length)
                depth = a.drafts.wanted(min(self.draft_tokens, left - 1))
                src_drafts = a.drafts.source
            entries.append((c.stream, c.start, a.ids[c.start + 1:a.fed + 1], src, depth,
                            src_drafts, len(a.out)))
        if entries:
            self.draft_source.after_round(self.driver, entries)
            self._steps += 1

    def _sampling_failed(self, a: Active, e: Exception) -> None:
        """One request's sampling raised: it ends alone. A 4xx (its own input, a grammar
        that failed) ends it with that status and code; anything else is a 500 logged
        with its traceback."""
        status = getattr(e, "status", None)
        if isinstance(status, int) and 400 <= status < 500:
            log.info("request %s: %s", a.req.id, e)
            self._finish(a, "error", f"{e} (after {len(a.out)} tokens)",
                         status=status, code=getattr(e, "code", None))
        else:
            log.exception("request %s: sampling", a.req.id)
            self._finish(a, "error", f"sampling failed: {e}")

    def _verify(self, a: Active, logits, first: int, drafts: tuple, best, now: float) -> None:
        """A verify chunk's tokens (server/drafts/verify.py), each taken as a decode's
        would be, until one is not the next draft or ends the reply; the stream's valid
        rows then end at the last draft taken."""
        taken = accepted = 0
        try:
            for tok, lp, top in verify_walk(self.driver, a.sampler, logits, first, drafts, best):
                accepted += taken < len(drafts) and tok == drafts[taken]
                taken += 1
                a.fed += 1                   # the row whose token this is, a valid row
                if not self._take(a, tok, lp, top, now):
                    break
        except Exception as e:               # a bug in one request's sampling ends it alone
            if a.req.id in self.active:
                self._sampling_failed(a, e)
        a.drafts.verified(len(drafts), accepted)
        self.draft_tokens_done += len(drafts)
        self.accepted_tokens_done += accepted
        if self.metrics is not None and hasattr(self.metrics, "drafted"):
            self.metrics.drafted(len(drafts), accepted)

    def _take(self, a: Active, tok: int, lp, top, now: float) -> bool:
        """One sampled token into the reply and out to its client; False when it ended
        the reply."""
        self.generation_tokens_done += 1
        a.out.append(tok)
        reason = self._finish_reason(a, tok)
        plp = None
        if a.first_token_at is None:
            a.first_token_at = now
            if a.req.params.prompt_logprobs is not None:
                plp = tuple(a.prompt_lps)
        self._emit(a.req.id, TokenEvent(tok, lp, top, None, prompt_tokens=len(a.req.prompt_ids),
                                        cached_tokens=a.cached, prompt_logprobs=plp))
        if reason:
            self._finish(a, reason)
            return False
        return True

    def _finish_reason(self, a: Active, tok: int) -> str | None:
        p = a.req.params
        if not p.ignore_eos and (tok in a.req.eos_ids or tok in p.stop_token_ids):
            return "stop"
        if a.sampler.done:                   # the grammar is complete (with ignore_eos too)
            return "stop"
        if len(a.out) >= p.max_tokens or a.length >= self.context:
            return "length"
        return None

    def _finish(self, a: Active, reason: str, error: str | None = None, *, status: int = 500,
                code: str | None = None):
        self.active.pop(a.req.id, None)
        self._release(a.req.id)              # (already released once its prompt was written)
        if reason in ("abort", "error"):     # nothing kept from a request that was cut off
            self._run_all(self.adm.cancel(a.req.id))
        else:                                # rows written: every fed token (the last sampled one never was)
            self._run_all(self.adm.finish(a.req.id, a.ids[: a.fed]))
        self._emit(a.req.id, TokenEvent(None, finish_reason=reason, error=error,
                                        error_code=status if error else 0, code=code,
                                        prompt_tokens=len(a.req.prompt_ids), cached_tokens=a.cached))
        if self.metrics:
            self.metrics.finished(a, reason)
