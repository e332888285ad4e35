"""Runs tests/api/test_prompt_logprob_bounds.py::test_health_answers_while_the_reply_is_built
N times in one process and prints, per run, the /health latencies' max (and which probe)
and the full (generation 2) garbage collections that ran meanwhile: their thread and
length. --suite-heap imports what the whole suite imports first (kernels, server,
hypothesis, openai, anthropic, schemathesis, gguf...), so a full pass walks a heap of the
size it walks in a whole-suite run. Run from the repository root:
  PYTHONPATH=$PWD:$PWD/tests:$PWD/tests/api python docs/receipts/2026-12-06-tidy39/stress_health.py 20 --suite-heap
"""
from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import pkgutil
import threading
import time

ap = argparse.ArgumentParser()
ap.add_argument("runs", type=int)
ap.add_argument("--suite-heap", action="store_true")
ap.add_argument("--worker-nice", type=int, default=None,
                help="the text workers' niceness instead of textwork.WORKER_NICE")
args = ap.parse_args()

if args.suite_heap:
    import kernels
    kernels.init()
    for m in ("server.api", "server.engine.build", "hypothesis", "openai", "anthropic",
              "schemathesis", "gguf", "numba", "fastapi"):
        try:
            importlib.import_module(m)
        except Exception:
            pass
    for info in pkgutil.walk_packages(kernels.__path__, "kernels."):
        try:
            importlib.import_module(info.name)
        except Exception:
            pass

import loop_probe                                   # noqa: E402
from server.api import textwork                     # noqa: E402
import test_prompt_logprob_bounds as mod            # noqa: E402

full: list = []
_t0: dict = {}


def _cb(phase, info):
    if info["generation"] != 2:
        return
    if phase == "start":
        _t0["t"] = time.monotonic(), time.thread_time()
    else:
        loop = asyncio._get_running_loop() is not None       # uvicorn's event loop thread
        name = "event loop" if loop else threading.current_thread().name
        w, c = _t0["t"]
        full.append((name, time.monotonic() - w, time.thread_time() - c))


gc.callbacks.append(_cb)
seen: list = []
_orig = loop_probe.health_while


def recording(*a, **kw):
    times, result = _orig(*a, **kw)
    seen.append(times)
    return times, result


mod.health_while = recording
if args.worker_nice is not None:
    textwork.WORKER_NICE = args.worker_nice
print(f"heap: {len(gc.get_objects())} tracked objects")
fails = 0
worst_all = []
for i in range(args.runs):
    del full[:]
    try:
        mod.test_health_answers_while_the_reply_is_built()
        ok = "pass"
    except AssertionError:
        ok = "FAIL"
        fails += 1
    times = seen[-1]
    worst = max(times)
    worst_all.append(worst)
    gcs = ", ".join(f"{name} {d * 1e3:.0f} ms ({c * 1e3:.0f} CPU)" for name, d, c in full) or "none"
    print(f"run {i:2d} {ok}: max /health {worst * 1e3:6.1f} ms (probe {times.index(worst)}), "
          f"full gc passes: {gcs}", flush=True)
worst_all.sort()
print(f"{fails}/{args.runs} failed; max /health median {worst_all[len(worst_all) // 2] * 1e3:.0f} ms, "
      f"worst {worst_all[-1] * 1e3:.0f} ms")
