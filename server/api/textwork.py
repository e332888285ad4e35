"""Tokenizing, chat-template rendering and large JSON replies, off the event loop.

Both can take seconds (a 4 MB prompt tokenizes in about 3 s on one CPU core, a chat of
110,000 messages renders in 3 s); run inside an async handler they stopped every other
request, /health included. `TextWork.run` hands them to a small thread pool; the
tokenizer (server/text/tokenizer.py) encodes through a call of the `tokenizers` library
that lets go of the GIL while it works, and the workers run at a lower CPU priority, so
the loop keeps answering.

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


def default_workers() -> int:
    return max(2, min(8, os.cpu_count() or 1))


# The workers run this much nicer than the event loop (Linux sets it per thread): on a
# busy host four long tokenizations otherwise take the cores the loop needs to answer.
WORKER_NICE = 10


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

    async def run(self, fn, *args, **kwargs):
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self.pool.shutdown(wait=False, cancel_futures=True)


def text_work(request) -> TextWork:
    return request.app.state.text_work


def _rendered(build) -> bytes:
    return slicedjson.dumps(build())


async def json_reply(request, build) -> Response:
    """The JSON reply build() makes, built and rendered on a worker: for replies that
    can be megabytes (logprobs, prompt_logprobs), whose building and json.dumps held
    the event loop for seconds."""
    body = await text_work(request).run(_rendered, build)
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
