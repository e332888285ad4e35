"""The API's side of a shutdown (SIGTERM or Ctrl-C on rank 0): a drain, then the exit.

    1. admission closes: a new request gets a 503 `shutting_down` with Retry-After (and
       `Connection: close`), /health a 503 `{"status": "stopping"}`, and the scheduler ends
       every request still waiting for a stream with the same 503 (`stop_admitting`, read
       by the engine thread between two rounds);
    2. the running requests go on, for `--shutdown-timeout` seconds at most;
    3. those still running then end with that error (`end_running`): a stream gets an
       error event and `data: [DONE]`, a whole reply the 503 in OpenAI's shape;
    4. the drain is over once every admitted request has given its place back
       (server/api/backlog.py), or `settle` seconds after 3 should the engine not answer.

The HTTP server (server/api/http_server.py) runs it on the first signal, keeps accepting
connections meanwhile (so new clients hear the 503, not a refused connection), and then
writes out what replies are left and stops. A second signal ends the running requests at
once (step 3 without waiting out step 2).
"""
from __future__ import annotations

import asyncio
import logging
import time

from server.requests import SHUTTING_DOWN

from .errors import ApiError

log = logging.getLogger("foldserve.api")

RETRY_AFTER = "1"
CLOSED = ("this server is shutting down and takes no new requests; retry shortly (another "
          "replica, or this one once it is restarted)")


def shutting_down(message: str = CLOSED) -> ApiError:
    return ApiError(503, message, code=SHUTTING_DOWN,
                    headers={"Retry-After": RETRY_AFTER, "Connection": "close"})


class Drain:
    """One server's shutdown; `since` is None until it begins."""

    POLL_S = 0.05

    def __init__(self):
        self.since: float | None = None
        self.cut = 0                     # requests step 3 ended
        self._hurry = False

    @property
    def started(self) -> bool:
        return self.since is not None

    def hurry(self) -> None:
        """End the running requests now (a second signal)."""
        self._hurry = True

    async def run(self, state, grace_s: float, settle_s: float = 5.0) -> None:
        self.since = time.monotonic()
        backlog, sched = state.backlog, state.scheduler
        log.info("shutting down: no new requests; %d in flight get up to %g s to finish "
                 "(--shutdown-timeout)", backlog.count, grace_s)
        sched.stop_admitting(CLOSED)
        await self._until_empty(backlog, self.since + grace_s, hurry=True)
        if backlog.count:
            self.cut = backlog.count
            sched.end_running(f"this server is shutting down: the request did not finish "
                              f"within {grace_s:g} s (--shutdown-timeout); retry it")
            await self._until_empty(backlog, time.monotonic() + settle_s, hurry=False)
        took = time.monotonic() - self.since
        if backlog.count:
            log.error("shutting down: %d requests did not end within %g s of being ended; "
                      "leaving them", backlog.count, settle_s)
        elif self.cut:
            log.warning("shutting down: %d requests ended unfinished after %.1f s", self.cut,
                        took)
        else:
            log.info("shutting down: every request finished (%.1f s)", took)

    async def _until_empty(self, backlog, deadline: float, hurry: bool) -> None:
        while backlog.count and time.monotonic() < deadline:
            if hurry and self._hurry:
                return
            await asyncio.sleep(self.POLL_S)
