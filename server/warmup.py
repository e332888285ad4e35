"""One small request through the scheduler before the server says it is ready, so the first
client's request runs as fast as the second.

On the CPU the first round compiles (or loads from numba's cache) the forward's kernels:
12-18 s from a fresh clone, which the first client used to wait for with nothing in the
log. Serve calls `warm_up` after the scheduler starts and before the HTTP socket leaves
its "loading" answer (server/api/http_socket.py), so /health is 503 "loading" until the
kernels are ready; on GPUs the same request builds the kernels and decode graphs the
first request would. The request is the ordinary path (a prefill of a few rows, then
decode rounds) on every rank: its prompt is shorter than a page, so the prompt cache
keeps nothing of it, and the API's metrics do not exist yet, so it counts nowhere.
"""
from __future__ import annotations

import asyncio
import logging
import time

from server.requests import GenRequest, SamplingParams

log = logging.getLogger("foldserve")

PROMPT_TOKENS = 8          # fewer than a page's rows (the prompt cache keeps whole pages)
NEW_TOKENS = 3             # a prefill round and decode rounds


def warm_up_ids(vocab: int) -> list[int]:
    """A prompt of PROMPT_TOKENS ids inside the vocabulary (their text does not matter)."""
    return [(11 + 97 * i) % max(vocab, 1) for i in range(PROMPT_TOKENS)]


async def _run(sched, req: GenRequest) -> tuple[int, str | None, str | None]:
    n, finish, error = 0, None, None
    async for ev in sched.generate(req):
        n += ev.token_id is not None
        if ev.finish_reason is not None:
            finish, error = ev.finish_reason, ev.error
    return n, finish, error


def warm_up(sched, vocab: int, what: str = "the kernels") -> float:
    """Run the warm-up request to its end; log and return its seconds. A failure is logged,
    not raised: the server still starts, and the first request meets the same error."""
    req = GenRequest(id="warm-up", prompt_ids=warm_up_ids(vocab),
                     params=SamplingParams(max_tokens=NEW_TOKENS, temperature=0.0,
                                           ignore_eos=True),
                     arrival=time.monotonic())
    log.info("warming up %s: one request of %d prompt tokens and %d new ones",
             what, PROMPT_TOKENS, NEW_TOKENS)
    t0 = time.monotonic()
    n, finish, error = asyncio.run(_run(sched, req))
    seconds = time.monotonic() - t0
    if finish == "length" and n == NEW_TOKENS:
        log.info("warm in %.1f s: %s are ready, the first request runs as fast as the second",
                 seconds, what)
    else:
        log.warning("warm-up request ended early (%s: %s) after %.1f s", finish, error, seconds)
    return seconds
