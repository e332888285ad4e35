"""Rank 0's periodic stats line (vLLM logs one like it), every --stats-interval seconds
while there is work, nothing while idle:

    stats: prompt 812.4 tokens/s, generation 96.0 tokens/s, running 4, waiting 2, KV 37.5% of pages in use (+6.2% kept by the prompt cache)
    stats: prompt 0.0 tokens/s, generation 4.5 tokens/s, running 3, waiting 0, KV windows 3 of 4 in use (prompt cache 0.0% of its pages)

Rates are over the interval, from the scheduler's token counters; the rest is
scheduler.stats() at the moment of the line. Control plane: no numpy.
"""
from __future__ import annotations

import logging
import threading
import time

log = logging.getLogger("foldserve")


def kv_fractions(s: dict) -> tuple[float, float]:
    """(pages held by running streams, pages kept by the prompt cache), each a fraction of the
    pool: free + held + kept == total."""
    total = s.get("pages_total") or 0
    if not total:
        return 0.0, 0.0
    kept = s.get("pages_kept") or 0
    held = total - (s.get("pages_free") or 0) - kept
    return held / total, kept / total


def stats_line(before: dict, now: dict, seconds: float) -> str | None:
    """The line for an interval, or None when nothing ran and nothing waits."""
    prompt = now.get("prompt_tokens_done", 0) - before.get("prompt_tokens_done", 0)
    gen = now.get("generation_tokens_done", 0) - before.get("generation_tokens_done", 0)
    running, waiting = now.get("streams_busy", 0), now.get("queue", 0)
    if not (prompt or gen or running or waiting):
        return None
    held, kept = kv_fractions(now)
    seconds = max(seconds, 1e-9)
    if now.get("paged", True):
        kv = f"KV {held:.1%} of pages in use (+{kept:.1%} kept by the prompt cache)"
    else:                        # whole windows: a running stream holds one; the pool is the cache's
        kv = (f"KV windows {running} of {now.get('streams_total', 0)} in use "
              f"(prompt cache {kept + held:.1%} of its pages)")
    return (f"stats: prompt {prompt / seconds:.1f} tokens/s, generation {gen / seconds:.1f} "
            f"tokens/s, running {running}, waiting {waiting}, {kv}")


class StatsLogger:
    def __init__(self, stats_fn, interval_s: float, clock=time.monotonic):
        self.stats_fn, self.interval_s, self.clock = stats_fn, interval_s, clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="foldserve-stats", daemon=True)

    def start(self) -> "StatsLogger":
        if self.interval_s > 0:
            self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        before, t0 = self.stats_fn(), self.clock()
        while not self._stop.wait(self.interval_s):
            now, t1 = self.stats_fn(), self.clock()
            line = stats_line(before, now, t1 - t0)
            if line:
                log.info("%s", line)
            before, t0 = now, t1
