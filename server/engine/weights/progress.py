"""The load's progress: a stderr bar drawn in place on a terminal; where stderr is not a
terminal (a log file, the journal under systemd) a log line every LOG_EVERY_S seconds
("loading m.gguf: 45% (12.3 s)"), then `report`'s "loaded ... in N s". Silent for the
first second either way (quick loads print nothing but the report)."""
from __future__ import annotations

import logging
import sys
import time

log = logging.getLogger("foldserve")

DELAY_S = 1.0
LOG_EVERY_S = 2.0
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
        self._last_log = float("-inf")
        self._tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def advance(self, n: int = 1) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if not self._tty:
            if now - self.start >= DELAY_S and now - self._last_log >= LOG_EVERY_S:
                self._last_log = now
                log.info("%s: %.0f%% (%.1f s)", self.label,
                         min(self.done / self.total, 1.0) * 100, now - self.start)
            return
        if now - self.start < DELAY_S or (now - self._last_draw < 0.1 and self.done < self.total):
            return
        self._last_draw = now
        self.shown = True
        frac = min(self.done / self.total, 1.0)
        bar = "#" * int(frac * WIDTH)
        self.stream.write(f"\r{self.label} [{bar:<{WIDTH}}] {frac * 100:5.1f}% {now - self.start:5.1f} s")
        self.stream.flush()

    def finish(self) -> float:
        """Ends the bar's line (if one was drawn) and returns the seconds since start."""
        if self.shown:
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
