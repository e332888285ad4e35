"""Python's full garbage collections, kept off the large bodies' objects.

A full (oldest-generation) collection walks every object the collector tracks, in one call
that holds the GIL. A chat of 110,000 messages makes several hundred thousand of them (the
parsed JSON, the validated messages, the dicts the template reads), and as they pile up
CPython's rule (a full pass once the objects promoted since the last one are a quarter of
the old generation) ran six full passes during one such request: 60-110 ms of CPU each, on a
text worker at a lower priority, so 95-270 ms of wall time on a busy host in which the
event loop's thread waited for the GIL and /health did not answer
(tests/e2e/test_hardening.py).

Those objects hold no cycles: reference counting frees them when the request ends. So:

* `freeze_startup()`, once before serving: the objects alive after start-up (modules, the
  app, schemas, templates; 117,000 here) move to the permanent generation, which no pass
  walks again (gc.freeze);
* `LargeBody()`, around the app's handling of a body past LARGE_BODY (server/api/bodylimit.py)
  and around the building of a large reply (textwork.json_reply: prompt_logprobs, logprobs):
  while any such request is in the app, no full pass starts (the oldest generation's
  threshold is out of reach); the young generations are still collected, their passes
  bounded by their thresholds. When the last one leaves, the threshold is as it was, and the
  next full pass finds those objects gone. Large bodies that keep overlapping hold it at
  most MAX_HOLD_S: a request that comes in later than that after the hold began lets it
  lapse (cyclic garbage that reached the old generation is not kept past that).

Python 3.14's collector is incremental (no one long pass); there the threshold is ignored.
"""
from __future__ import annotations

import gc
import threading
import time

NEVER = 1 << 30          # gen-1 collections before a full pass: not while a large body is in
MAX_HOLD_S = 30.0

_lock = threading.Lock()
_held = 0
_saved: int | None = None
_since = 0.0
_lapsed = False


def freeze_startup() -> None:
    gc.collect()                 # start-up's garbage is not frozen with the rest
    gc.freeze()


class LargeBody:
    """Full collections held off while this request is handled (nestable, thread-safe)."""

    def __enter__(self):
        global _held, _saved, _since, _lapsed
        with _lock:
            if _held == 0:
                t0, t1, t2 = gc.get_threshold()
                _saved, _since, _lapsed = t2, time.monotonic(), False
                gc.set_threshold(t0, t1, NEVER)
            elif not _lapsed and time.monotonic() - _since > MAX_HOLD_S:
                _restore()
                _lapsed = True
            _held += 1
        return self

    def __exit__(self, *exc):
        global _held, _saved, _lapsed
        with _lock:
            _held -= 1
            if _held == 0:
                if not _lapsed:
                    _restore()
                _saved, _lapsed = None, False
        return False


def _restore() -> None:
    t0, t1, _ = gc.get_threshold()
    gc.set_threshold(t0, t1, _saved)


def held() -> int:
    """How many large bodies hold full collections off now (for tests)."""
    return _held
