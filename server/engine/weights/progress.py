"""A quiet stderr progress bar: silent for the first second, so quick loads print nothing."""
from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("foldserve")

DELAY_S = 1.0
WIDTH = 30


class Progress:
    def __init__(self, label: str, total: int, enabled: bool = True, stream=None,
                 start: float | None = None):
        self.label, self.total, self.enabled = label, max(int(total), 1), enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = 0
        self.start = time.monotonic() if start is None else start   # time.monotonic() of the load's start
        self.shown = False
        self._last_draw = 0.0
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        # a terminal redraws in place; a log file gets a line a second at most
        gap = 0.1 if self._tty else 1.0
        if now - self.start < DELAY_S or (now - self._last_draw < gap and self.done < self.total):
            return
        self._last_draw = now
        self.shown = True
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * WIDTH)
        lead, end = ("\r", "") if self._tty else ("", "\n")
        self.stream.write(f"{lead}{self.label} [{bar:<{WIDTH}}] {frac * 100:5.1f}% {now - self.start:5.1f} s{end}")
        self.stream.flush()

    def finish(self) -> float:
        """Ends the bar's line (if one was drawn) and returns the seconds since start."""
        if self.shown and self._tty:
            self.stream.write("\n")
            self.stream.flush()
            self.shown = False
        return time.monotonic() - self.start

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finish()
        return False


def report(model: str, seconds: float) -> None:
    log.info("loaded %s in %.1f s", model, seconds)
