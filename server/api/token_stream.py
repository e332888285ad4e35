"""One request's token stream: scheduler events in, text pieces out.

The driver detokenizes incrementally, cuts at stop strings (and then cancels the
scheduler's request), observes latency metrics, and - whatever way it ends, including
the client leaving (CancelledError) - makes sure the scheduler hears cancel(req_id)
unless the request already finished, so its stream and pages free by the next round.
"""
from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field

from server.requests import SHUTTING_DOWN, GenRequest

from .drain import CLOSED, shutting_down
from .errors import ApiError
from .textflow import detokenizer, stop_matcher


@dataclass
class Piece:
    text: str
    tokens: list = field(default_factory=list)   # [(token_id, logprob, top_logprobs)]
    finish: str | None = None                     # stop | length, on the last piece
    error: ApiError | None = None                 # set on the last piece when it failed


class Generation:
    def __init__(self, state, metrics, req: GenRequest, stops, *,
                 include_stop: bool = False, skip_special: bool = True, index: int = 0,
                 reasoning=None):
        self.state, self.metrics, self.req = state, metrics, req
        # stops: a StopSet (shared by a request's choices) or a list of stop strings
        self.stops, self.include_stop, self.skip_special = stops, include_stop, skip_special
        self.index = index                            # the choice's index (n > 1)
        # eos and stop tokens end the reply without showing up in its text, unless
        # include_stop_str_in_output; with ignore_eos they are ordinary tokens, as the
        # scheduler treats them, and skip_special_tokens (default) keeps special ones
        # such as <|im_end|> out of the text
        self.skip_ids = set() if req.params.ignore_eos or include_stop else \
            set(req.eos_ids) | set(req.params.stop_token_ids)
        self.prompt_tokens = len(req.prompt_ids)
        self.cached_tokens = 0
        self.completion_tokens = 0
        # reasoning: a fresh splitter of the reply (ReasoningPlan.stream()) or None; a
        # piece's tokens count as reasoning when the reply is inside its reasoning before
        # or after the piece's text (the closing marker counts), and the tokens of an
        # undecided stretch (an opening marker, a harmony header) count once it turns out
        # to open the reasoning
        self._split = reasoning
        self._undecided = 0
        self.reasoning_tokens = 0
        self.finish: str | None = None
        self.stop_string: str | None = None         # the stop string that ended the reply
        self.first_token_s: float | None = None     # arrival to the first token
        self.prompt_logprobs = None  # the scheduler's entries, on the first token's event
        self.ticket = None          # the queue place (backlog.Ticket), released at the end

    def usage(self) -> dict:
        return {"prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.prompt_tokens + self.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": self.cached_tokens},
                **({"completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens}}
                   if self._split is not None else {})}

    async def pieces(self):
        """Yields Pieces; the last one has finish or error set. Counts reasoning_tokens."""
        async for p in self._pieces():
            if self._split is not None and p.tokens:
                self._count_reasoning(p)
            yield p

    def _count_reasoning(self, p: Piece) -> None:
        s = self._split
        before = s.in_reasoning
        s.push(p.text)
        if before or s.in_reasoning:
            self.reasoning_tokens += self._undecided + len(p.tokens)
            self._undecided = 0
        elif s.undecided:
            self._undecided += len(p.tokens)
        else:
            self._undecided = 0

    async def _pieces(self):
        sched, req, metrics = self.state.scheduler, self.req, self.metrics
        detok = detokenizer(self.state.tokenizer, self.req.prompt_ids, self.skip_special)
        stops = stop_matcher(self.stops, self.include_stop)
        min_tokens = req.params.min_tokens
        pending: list = []          # tokens whose text is not sent yet
        last_t: float | None = None
        done = False
        events = sched.generate(req)
        try:
            async for ev in events:
                now = time.monotonic()
                if ev.prompt_tokens:
                    self.prompt_tokens = ev.prompt_tokens
                if ev.prompt_logprobs is not None:
                    self.prompt_logprobs = ev.prompt_logprobs
                self.cached_tokens = max(self.cached_tokens, ev.cached_tokens or 0)
                text = ""
                if ev.token_id is not None:
                    self.completion_tokens += 1
                    if last_t is None:
                        metrics.ttft.observe(now - req.arrival)
                        self.first_token_s = now - req.arrival
                    else:
                        metrics.token_gap(now - last_t)
                    last_t = now
                    if ev.token_id not in self.skip_ids:
                        text = detok.push(ev.token_id)
                        pending.append((ev.token_id, ev.logprob, ev.top_logprobs))
                if ev.finish_reason is not None:
                    text += detok.flush()
                # stop strings count from min_tokens on (vLLM's rule)
                armed = self.completion_tokens >= min_tokens
                emit, stopped = stops.push(text, armed) if text else ("", False)
                if stopped:
                    done = True
                    self.finish = "stop"
                    self.stop_string = stops.matched
                    sched.cancel(req.id)        # text-level stop: the scheduler may not know
                    yield Piece(emit, pending, finish="stop")
                    return
                if ev.finish_reason is not None:
                    done = True
                    flush = getattr(stops, "flush", None)
                    emit += flush() if flush else ""
                    yield self._last(ev, emit, pending)
                    return
                if emit:
                    yield Piece(emit, pending)
                    pending = []
            done = True
            self.finish = "error"
            yield Piece("", pending, error=ApiError(
                503, "the scheduler ended the stream without a finish reason",
                code="scheduler_error"))
        finally:
            if not done:                        # client left, or we failed: free the stream
                sched.cancel(req.id)
            if self.ticket is not None:
                self.ticket.release()
            with contextlib.suppress(Exception):
                await events.aclose()
            self._observe_end()

    def _last(self, ev, emit: str, pending: list) -> Piece:
        reason = ev.finish_reason
        if reason in ("stop", "length"):
            self.finish = reason
            return Piece(emit, pending, finish=reason)
        self.finish = "error" if reason == "error" else "abort"
        if reason == "error" and ev.code == SHUTTING_DOWN:
            err = shutting_down(ev.error or CLOSED)
        elif reason == "error":
            status = ev.error_code if 400 <= (ev.error_code or 0) < 600 else 503
            # the scheduler's 503 means the engine (a rank) is gone
            err = ApiError(status, ev.error or "generation failed",
                           code=ev.code or ("rank_lost" if status == 503 else "generation_error"))
        else:
            err = ApiError(503, f"the server ended this request ({reason}) before it finished",
                           code="request_aborted")
        return Piece(emit, pending, error=err)

    def _observe_end(self) -> None:
        self.metrics.request_done(
            reason=self.finish or "abort", e2e=time.monotonic() - self.req.arrival,
            prompt_tokens=self.prompt_tokens, cached_tokens=self.cached_tokens,
            completion_tokens=self.completion_tokens, req_id=self.req.id,
            first_token_s=self.first_token_s)


async def _client_gone(request) -> None:
    """Returns once the client disconnects (the body was already read)."""
    while True:
        message = await request.receive()
        if message.get("type") == "http.disconnect":
            return


async def collect(request, gen: Generation):
    """Run a whole generation, unless the client leaves first (then None, and cancelled).

    Returns (text, tokens, finish, error)."""
    results = await collect_all(request, [gen])
    return None if results is None else results[0]


async def _run_one(gen: Generation):
    text, tokens = [], []
    async for p in gen.pieces():
        text.append(p.text)
        tokens.extend(p.tokens)
        if p.finish or p.error:
            return "".join(text), tokens, p.finish, p.error
    return "".join(text), tokens, None, None


async def collect_all(request, gens: list):
    """Every choice of a request (n of them), run at once; None if the client left first
    (then every one is cancelled)."""
    work = asyncio.ensure_future(asyncio.gather(*(_run_one(g) for g in gens)))
    gone = asyncio.ensure_future(_client_gone(request))
    try:
        await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not work.done():
            work.cancel()               # each one's finally tells the scheduler to cancel
            with contextlib.suppress(BaseException):
                await work
        gone.cancel()
    if not work.done() or work.cancelled():
        return None
    try:
        return work.result()
    except asyncio.CancelledError:      # a gather whose children were cancelled
        return None


async def merged(streams: list):
    """Items of several async generators as they come: (index, item); each generator's
    own order kept. An exception in one ends the whole (the others are closed).

    Each generator runs in a task of its own, one at n = 1 too, whether or not the
    consumer takes its items: a stream whose client stops reading (its writes block) still
    runs its generation to the end, so the queue place (backlog.Ticket) is given back when
    the engine finishes, not when the client reads. The items wait here; the consumer
    closing the iteration (the client gone, or cut off by --write-timeout) cancels them."""
    q: asyncio.Queue = asyncio.Queue()
    done = object()

    async def pump(i, gen):
        try:
            async for item in gen:
                await q.put((i, item, None))
        except BaseException as e:      # noqa: BLE001 - handed to the consumer
            await q.put((i, done, e))
            return
        await q.put((i, done, None))

    tasks = [asyncio.ensure_future(pump(i, g)) for i, g in enumerate(streams)]
    left = len(tasks)
    try:
        while left:
            i, item, err = await q.get()
            if err is not None and not isinstance(err, asyncio.CancelledError):
                raise err
            if item is done:
                left -= 1
                continue
            yield i, item
    finally:
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(BaseException):
                await t


