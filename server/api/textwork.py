"""Tokenizing, chat-template rendering and large JSON replies, off the event loop.

Both can take seconds (a 4 MB prompt tokenizes in about 3 s on one CPU core, a chat of
110,000 messages renders in 3 s); run inside an async handler they stopped every other
request, /health included. `TextWork.run` hands them to a small thread pool; the
tokenizer (server/text/tokenizer.py) encodes through a call of the `tokenizers` library
that lets go of the GIL while it works, and the workers run at a lower CPU priority, so
the loop keeps answering.

A large JSON reply is built and rendered in Python, holding the GIL throughout but for its
switches: it runs on threads of its own at the loop's priority (`run_holding`). A niced
thread that holds the GIL gains the loop nothing (while it holds it, the loop waits for it)
and on a busy host it is the last to get a core back and let the GIL go: with two CPU
hogs on two cores, a 7,000-token prompt_logprobs reply built at nice 10 kept /health from
answering for a median 179 ms a run (the slowest of 40 polls), at the loop's priority 40 ms
(docs/receipts/2026-12-06-tidy39). Full garbage collections are held off while it is built
(gchold.LargeBody): its objects hold no cycles, and a full pass over them, holding the GIL,
would stop the loop as long as it walks.

`refuse_sure_overflow` is the per-request token bound checked before the expensive part:
no token covers more characters than the longest one in the vocabulary, so a text longer
than context x that many characters is over the context whatever it tokenizes to.
"""
from __future__ import annotations

import asyncio
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

from starlette.responses import Response

from . import slicedjson
from .errors import ApiError
from .gchold import LargeBody


def default_workers() -> int:
    return max(2, min(8, os.cpu_count() or 1))


# The workers run this much nicer than the event loop (Linux sets it per thread): on a
# busy host four long tokenizations otherwise take the cores the loop needs to answer.
WORKER_NICE = 10
# Threads for work that holds the GIL (run_holding): more would only take turns at it.
HOLDING_WORKERS = 2


def _lower_priority() -> None:
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WORKER_NICE)
    except (AttributeError, OSError):
        pass


class TextWork:
    def __init__(self, workers: int | None = None):
        self.workers = workers or default_workers()
        self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="foldserve-text",
                                       initializer=_lower_priority)
        self.holding = ThreadPoolExecutor(HOLDING_WORKERS, thread_name_prefix="foldserve-reply")

    async def run(self, fn, *args, **kwargs):
        """fn on a niced worker: for work that lets the GIL go (tokenizing)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    async def run_holding(self, fn, *args, **kwargs):
        """fn on a worker at the loop's priority: for Python work that holds the GIL."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.holding, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)
        self.holding.shutdown(wait=False, cancel_futures=True)


def text_work(request) -> TextWork:
    return request.app.state.text_work


def _rendered(build) -> bytes:
    with LargeBody():           # no full collection walks the reply as it grows
        return slicedjson.dumps(build())


async def json_reply(request, build) -> Response:
    """The JSON reply build() makes, built and rendered on a worker at the loop's priority,
    full collections held off meanwhile: for replies that can be megabytes (logprobs,
    prompt_logprobs), whose building and json.dumps held the event loop for seconds."""
    body = await text_work(request).run_holding(_rendered, build)
    return Response(body, media_type="application/json")


def max_token_chars(tok) -> int | None:
    """The most characters one token decodes to (computed once per tokenizer)."""
    cached = getattr(tok, "_foldserve_max_token_chars", None)
    if cached is not None:
        return cached
    vocab = getattr(tok, "vocab_size", None)
    if not isinstance(vocab, int) or vocab <= 0:
        return None
    longest = max(len(tok.decode([i])) for i in range(vocab))
    try:
        tok._foldserve_max_token_chars = longest
    except AttributeError:
        pass
    return longest


def refuse_sure_overflow(state, text: str, param: str) -> None:
    """400 for a text that cannot fit the context, without tokenizing it."""
    if len(text) <= state.context:        # under the bound whatever the vocabulary
        return
    longest = max_token_chars(state.tokenizer)
    if longest and len(text) > state.context * longest:
        least = -(-len(text) // longest)
        raise ApiError(400, f"This server's maximum context length is {state.context} "
                       f"tokens; the prompt ({len(text)} characters) has at least {least} "
                       "tokens", param=param, code="context_length_exceeded")
