"""At most one log line a second for errors that come in floods.

When file descriptors run out, asyncio's accept loop logs "socket.accept() out of system
resource" (with its traceback) once for every try, up to the listen backlog per tick:
190,000 lines in 20 s were seen. This filter lets one such record through a second and
says how many it held back."""
from __future__ import annotations

import errno
import logging
import time

FLOOD_ERRNOS = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def is_flood(record: logging.LogRecord) -> bool:
    exc = record.exc_info[1] if record.exc_info else None
    if isinstance(exc, OSError) and exc.errno in FLOOD_ERRNOS:
        return True
    return "Too many open files" in record.getMessage()


class OncePerSecond(logging.Filter):
    def __init__(self, period_s: float = 1.0, clock=time.monotonic):
        super().__init__()
        self.period_s, self.clock = period_s, clock
        self.last = -float("inf")
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not is_flood(record):
            return True
        now = self.clock()
        if now - self.last < self.period_s:
            self.held += 1
            return False
        if self.held:
            record.msg = f"{record.msg} ({self.held} more like it held back)"
        self.last, self.held = now, 0
        return True


def throttle_floods(*logger_names: str) -> OncePerSecond:
    f = OncePerSecond()
    for name in logger_names or ("asyncio", "uvicorn.error"):
        logging.getLogger(name).addFilter(f)
    return f
