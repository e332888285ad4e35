"""Run a function as real rank processes (multiprocessing 'spawn') and collect what each did.

Each rank process calls target(rank, world, port, *args) and reports back
("ok", value) or ("err", exception type name, message, and RankLost's rank if any);
an error also makes the process exit non-zero. run() never leaves a process behind:
whatever is still alive at the deadline is killed, and that is reported.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import sys
import time
from dataclasses import dataclass, field
from free_ports import free_port as _free_port

HOST = "127.0.0.1"


def free_port() -> int:
    return _free_port(HOST)   # below the ephemeral range: tests/free_ports.py


@dataclass
class Outcome:
    rank: int
    status: str = "none"           # ok | err | none (no report: killed or died)
    value: object = None
    error: str = ""                # exception type name
    message: str = ""
    lost_rank: int | None = None
    exitcode: int | None = None
    seconds: float = 0.0           # from start to the process' exit


@dataclass
class Run:
    outcomes: dict = field(default_factory=dict)
    left_behind: list = field(default_factory=list)
    seconds: float = 0.0


def _child(target, rank, world, port, args, results):
    try:
        value = target(rank, world, port, *args)
    except BaseException as e:
        results.put((rank, "err", type(e).__name__, str(e), getattr(e, "rank", None)))
        sys.stdout.flush()
        os._exit(1)
    results.put((rank, "ok", value))
    os._exit(0)


def run(target, world: int, *args, ranks=None, deadline_s: float = 30.0, port=None) -> Run:
    ctx = mp.get_context("spawn")
    results = ctx.SimpleQueue()
    port = port or free_port()
    ranks = list(range(world)) if ranks is None else ranks
    t0 = time.monotonic()
    procs = {r: ctx.Process(target=_child, args=(target, r, world, port, args, results), daemon=True)
             for r in ranks}
    for p in procs.values():
        p.start()
    out = Run(outcomes={r: Outcome(r) for r in ranks})
    waiting = set(ranks)
    while waiting and time.monotonic() - t0 < deadline_s:
        for r in list(waiting):
            procs[r].join(timeout=0.02)
            if procs[r].exitcode is not None:
                out.outcomes[r].exitcode = procs[r].exitcode
                out.outcomes[r].seconds = time.monotonic() - t0
                waiting.discard(r)
    for r in waiting:                      # past the deadline: kill, and say so
        out.left_behind.append(r)
        procs[r].kill()
        procs[r].join(5)
        out.outcomes[r].exitcode = procs[r].exitcode
    while not results.empty():
        item = results.get()
        o = out.outcomes[item[0]]
        if item[1] == "ok":
            o.status, o.value = "ok", item[2]
        else:
            o.status, o.error, o.message, o.lost_rank = "err", item[2], item[3], item[4]
    out.seconds = time.monotonic() - t0
    return out
