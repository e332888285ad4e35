"""The app under a real uvicorn in a thread, and /health timed while something else runs:
how long one request keeps the event loop from answering others."""
from __future__ import annotations

import contextlib
import gc
import threading
import time

import httpx

from uvicorn_thread import serving  # noqa: F401  (the tests import it from here too)


def health_while(url: str, send, *, settle_s: float = 0.5, probes: int = 10,
                 gap_s: float = 0.1) -> tuple[list[float], list]:
    """Starts send(client) -> result on a thread, waits settle_s, then times `probes` GETs
    of /health. Returns (their latencies in seconds, [send's result] once it is done).

    The objects alive before send are frozen meanwhile (gc.freeze), as a served process
    freezes its start-up objects (gchold.freeze_startup): a full collection then walks
    what the request made, as in the server, not the whole test run's heap (a full pass
    over a whole-suite process, 100-200 ms of CPU holding the GIL, is the test's cost)."""
    result: list = []

    def run():
        with httpx.Client(timeout=600) as c:
            with contextlib.suppress(httpx.HTTPError):
                result.append(send(c))

    t = threading.Thread(target=run, daemon=True)
    gc.freeze()
    try:
        with httpx.Client(timeout=60) as probe:
            probe.get(url + "/health")               # connected before the clock starts
            t.start()
            time.sleep(settle_s)
            times = []
            for _ in range(probes):
                t0 = time.monotonic()
                assert probe.get(url + "/health").status_code == 200
                times.append(time.monotonic() - t0)
                time.sleep(gap_s)
        t.join(120)
    finally:
        gc.unfreeze()
    return times, result
