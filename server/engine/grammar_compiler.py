"""Where grammars compile: a few threads with a large stack, and a time budget for each job.

`run(fn, *args)` calls fn on one of WORKERS threads whose stack is STACK_BYTES (set with
threading.stack_size when the thread starts; only touched pages are committed), and waits
at most BUDGET_S seconds for it:
- fn's result, or its exception, comes back as it is;
- a job still running at the budget: CompileTimeout (it runs on to its end in the
  background, holding its worker; the engine's own limits end it, grammar_limits keeps
  it short);
- a job that has not started by then (every worker busy): CompilerBusy.

Why threads and not a process: a compiled matcher cannot leave the process it was built
in, so a separate process could only judge a grammar that the server must then compile
again, on its own stack, with twice the time; and a stack overflow is the one failure
that needs more than a catch. A 256 MiB stack holds a chain ~30 times longer than the
8 MiB default did (docs/receipts/2026-12-05-hardening-2/grammar.md), far beyond
grammar_limits' bounds, and llguidance turns its panics into errors itself.
"""
from __future__ import annotations

import concurrent.futures
import queue
import threading

STACK_BYTES = 256 << 20
WORKERS = 2
BUDGET_S = 10.0

_LOCK = threading.Lock()
_JOBS: queue.SimpleQueue = queue.SimpleQueue()
_THREADS: list[threading.Thread] = []


class CompileTimeout(Exception):
    """The job ran past the budget."""


class CompilerBusy(Exception):
    """Every worker was busy for the whole budget; the job never started."""


def _serve() -> None:
    while True:
        fut, fn, args = _JOBS.get()
        if not fut.set_running_or_notify_cancel():
            continue                 # given up on while queued
        try:
            fut.set_result(fn(*args))
        except BaseException as e:   # noqa: BLE001 - handed to the waiter as it is
            fut.set_exception(e)


def _start() -> None:
    with _LOCK:
        while len(_THREADS) < WORKERS:
            old = threading.stack_size(STACK_BYTES)
            try:
                t = threading.Thread(target=_serve, name=f"foldserve-grammar-{len(_THREADS)}",
                                     daemon=True)
                t.start()
            finally:
                threading.stack_size(old)
            _THREADS.append(t)


def run(fn, *args, budget_s: float | None = None):
    """fn(*args) on a large-stack worker, within budget_s (default BUDGET_S) seconds."""
    _start()
    fut: concurrent.futures.Future = concurrent.futures.Future()
    _JOBS.put((fut, fn, args))
    budget = BUDGET_S if budget_s is None else budget_s
    concurrent.futures.wait([fut], timeout=budget)
    if fut.cancel():
        raise CompilerBusy(f"every grammar compiler was busy for {budget:g} s")
    if not fut.done():
        raise CompileTimeout(f"compiling took longer than {budget:g} s")
    return fut.result()
