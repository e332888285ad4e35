"""The requests the API has accepted and not yet finished, counted at admission.

The scheduler's own waiting list is no bound under a burst: a request reaches it only
after its handler has started and the engine thread's next round has drained the inbox,
so forty requests at once all pass a check of that list. This count rises the moment a
request is admitted (before the handler awaits anything) and falls when its generation
ends, however it ends; `--max-queue N` is then N requests beyond the streams that can run.
An n > 1 request is one request here (one place, shared by its choices: `shares`).
"""
from __future__ import annotations

import threading


class Ticket:
    """One admitted request's place; release() is idempotent (the driver's finally and,
    for a generation that never started, garbage collection both call it)."""

    __slots__ = ("_backlog", "_held")

    def __init__(self, backlog: "Backlog"):
        self._backlog, self._held = backlog, True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._backlog._leave()

    def __del__(self):
        self.release()


class Share:
    """One choice's hold on an n > 1 request's single Ticket: the ticket is released when
    the last choice releases (release() idempotent per choice, as Ticket's)."""

    __slots__ = ("_ticket", "_left", "_held")

    def __init__(self, ticket: Ticket, left: list):
        self._ticket, self._left, self._held = ticket, left, True

    def release(self) -> None:
        if self._held:
            self._held = False
            self._left[0] -= 1
            if self._left[0] == 0:
                self._ticket.release()

    def __del__(self):
        self.release()


def shares(ticket: Ticket, n: int) -> list:
    """n holds on one place: an n > 1 request takes one queue place, not n."""
    left = [n]
    return [Share(ticket, left) for _ in range(n)]


class Backlog:
    def __init__(self):
        self._lock = threading.Lock()
        self.count = 0

    def waiting(self, streams: int) -> int:
        """Admitted requests beyond the ones the scheduler's streams can run."""
        return max(0, self.count - max(0, streams))

    def enter(self) -> Ticket:
        with self._lock:
            self.count += 1
        return Ticket(self)

    def _leave(self) -> None:
        with self._lock:
            self.count -= 1
