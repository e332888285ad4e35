"""Where a b1 decode step's host time goes (smollm2-135m shape, graphs on): the host clock
around model.forward (graph input fill + replay launch), the arg-max launch, and the read
back (.get(): waits for the device), against the graph's device time alone.
  python3 bench/host_probe.py"""
from __future__ import annotations

import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.fixtures import model_of, store  # noqa: E402
from kernels import argmax_cuda  # noqa: E402
from server.engine.rows import RoundChunk  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402

spec = SHAPES[sys.argv[1] if len(sys.argv) > 1 else "smollm2-135m"]
model = model_of(spec)
P = 16
kv = store(spec, 1024, P, fill=False)
table = tuple(range(1024 // P))
model.forward([(table, P, 0, tuple(range(1, 129)), True)], kv)
pos, tok = 128, 17
t = np.zeros(4)
for i in range(203):
    a = time.perf_counter()
    lg = model.forward([(table, P, pos, (tok,), True)], kv)
    b = time.perf_counter()
    ids = argmax_cuda.cuda(lg)
    c = time.perf_counter()
    tok = ids.get().tolist()[0]
    d = time.perf_counter()
    pos += 1
    if i >= 3:
        t += (b - a, c - b, d - c, d - a)
t *= 1e3 / 200
print(f"{spec.name} b1 host ms a step: forward call {t[0]:.3f}, arg-max launch {t[1]:.3f}, "
      f"read back (waits for the device) {t[2]:.3f}, step {t[3]:.3f}")
g = model.graphs.graphs[1]
s = cp.cuda.Stream(non_blocking=True)
e0, e1 = cp.cuda.Event(), cp.cuda.Event()
ts = []
for _ in range(50):
    e0.record(s)
    g.graph.launch(stream=s)
    e1.record(s)
    e1.synchronize()
    ts.append(cp.cuda.get_elapsed_time(e0, e1))
print(f"graph replay alone (device) {np.median(ts):.3f} ms")

# the host pieces of one replay and one arg-max, each timed alone (device idle)
import timeit  # noqa: E402
chunks = [RoundChunk(table, P, pos, (tok,), True)]       # _Graph.fill reads the named fields
h = g.host
cur = cp.cuda.get_current_stream()
parts = {
    "fill host buffer": lambda: g.fill(chunks),
    "events + wait": lambda: (g.ready.record(cur), g.stream.wait_event(g.ready)),
    "buf.set": lambda: g.buf.set(h, stream=g.stream),
    "graph.launch": lambda: g.graph.launch(stream=g.stream),
    "out[:b]": lambda: g.out[:1],
    "arg-max launch": lambda: argmax_cuda.cuda(lg),
    "cp.empty(1)": lambda: cp.empty((1,), dtype=cp.int32),
    "stream.is_capturing": lambda: cur.is_capturing(),
}
for name, f in parts.items():
    n = 20 if name == "graph.launch" else 200
    dt = timeit.timeit(f, number=n) / n
    cp.cuda.Device().synchronize()
    print(f"  {name:22s} {1e6 * dt:8.1f} us")
