"""Where a decode step's time goes, per op: each op call the model makes in one step is
recorded, then replayed alone as a one-call CUDA graph (device time, no host; minus an empty
graph's launch), and the whole step is timed as a graph replay and through Model.forward with
the host (as bench384 does). Step minus the ops' sum is the latency between nodes.

  python3 bench/op_profile.py [--shapes smollm2-135m,llama3-8b] [--M 1] [--context 384]
                              [--pdl 0|1] [--sync]
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import cupy as cp  # noqa: E402

from bench.cudatime import cuda_ms, graph_ms  # noqa: E402
from bench.fixtures import model_of, store  # noqa: E402
from server.shapes.spec import SHAPES  # noqa: E402

SYNC = False
WRAP = ("embed", "linear", "rms_norm", "add_rms_norm", "norm_linear", "gate_up_silu", "qkv_attend")


def profile(spec, M, context, P=16, prefill=0):
    """prefill > 0: one prompt of that many tokens from position 0 instead (eager only)."""
    model = model_of(spec)
    ops = model.ops                                   # its backend (kernels.ops.backend)
    kv = store(spec, max(context * M, prefill + P), P, fill=True)
    per = context // P
    chunks = [(tuple(range(s * per, (s + 1) * per)), P, context - 2, (17,), True) for s in range(M)]
    if prefill:
        chunks = [(tuple(range(-(-prefill // P))), P, 0, tuple(range(1, prefill + 1)), True)]
    rows = model.rows(chunks)
    names = {}
    for L in model.w.layers[:1]:
        names.update({L.wqkv.shape[0]: "qkv", L.wo.shape[0]: "o", L.wgu.shape[0]: "gate_up",
                      L.wdown.shape[0]: "down"})
    names[model.w.lm_head.shape[0]] = "lm_head"
    calls, orig = [], {n: getattr(ops, n) for n in WRAP}

    def wrap(n, f):
        def g(*a, **k):
            wi = {"linear": 1, "norm_linear": 4, "gate_up_silu": 1}.get(n)
            tag = n if wi is None else f"{n}:{names.get(a[wi].shape[0], a[wi].shape[0])}"
            calls.append((tag, f, a, k))
            r = f(*a, **k)
            if SYNC:                                  # --sync: name the op whose kernel faults
                try:
                    cp.cuda.Device().synchronize()
                except Exception:
                    print(f"  FAULT in {tag} (call {len(calls)})", flush=True)
                    raise
            return r
        return g

    for n in WRAP:
        setattr(ops, n, wrap(n, orig[n]))
    try:
        model.run(rows, kv)
    finally:
        for n in WRAP:
            setattr(ops, n, orig[n])
    # graph_ms replays on a non-blocking stream: without this wait its first replays could run
    # beside the eager step still on the device (two split-mode attention launches on the same
    # per-tile counters: the likely cause of the fault seen in a run's second configuration)
    cp.cuda.Device().synchronize()
    z = cp.zeros(1, dtype=cp.float32)
    empty = graph_ms(lambda: z.__iadd__(1), reps=20, inner=1)
    tot, cnt = collections.defaultdict(float), collections.Counter()
    for i, (tag, f, a, k) in enumerate(calls):
        try:
            tot[tag] += graph_ms(lambda: f(*a, **k), reps=10, inner=1) - empty
        except Exception:
            print(f"  FAULT in the graph replay of {tag} (call {i + 1})", flush=True)
            raise
        cnt[tag] += 1
    eager = cuda_ms(lambda: model.run(rows, kv), reps=5, warm=2)
    if prefill:
        _report(f"{spec.name} prefill {prefill} tokens", empty, tot, cnt)
        print(f"  ops sum {sum(tot.values()):.3f} ms; eager forward {eager:.3f} ms", flush=True)
        return
    model.forward(chunks, kv)                        # capture the bucket's graph
    g = model.graphs.graphs[next(b for b in (1, 2, 4, 8, 16, 32, 64, 128) if b >= M)]
    graph = cuda_ms(lambda: g.graph.launch(stream=cp.cuda.get_current_stream()), reps=20, warm=3)
    host = cuda_ms(lambda: model.forward(chunks, kv), reps=20, warm=3)
    ops_sum = sum(tot.values())
    _report(f"{spec.name} M={M} context {context}", empty, tot, cnt)
    print(f"  ops sum {ops_sum:.3f} ms; eager step {eager:.3f} ms; graph replay {graph:.3f} ms; "
          f"forward with host {host:.3f} ms; graph - ops = {graph - ops_sum:.3f} ms", flush=True)


def _report(title, empty, tot, cnt) -> None:
    """The header and one line an op, slowest first."""
    print(f"== {title} (an empty graph's launch: {1e3 * empty:.1f} us, subtracted)")
    for tag in sorted(tot, key=lambda t: -tot[t]):
        print(f"  {tag:18s} {tot[tag]:8.3f} ms  ({cnt[tag]} calls, {1e3 * tot[tag] / cnt[tag]:7.1f} us each)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default="smollm2-135m,llama3-8b")
    ap.add_argument("--M", default="1")
    ap.add_argument("--context", default="384")
    ap.add_argument("--prefill", type=int, default=0, help="profile one prompt of N tokens instead")
    ap.add_argument("--fuse-norm", type=int, default=None, help="1/0: RMSNorm in the GEMM or not")
    ap.add_argument("--sync", action="store_true", help="synchronize after each op (find a fault)")
    ap.add_argument("--pdl", type=int, default=None, help="1/0: programmatic dependent launch in graphs")
    a = ap.parse_args()
    global SYNC
    SYNC = a.sync
    if a.fuse_norm is not None:
        from kernels import matmul_fused_cuda
        matmul_fused_cuda.FUSE_NORM = bool(a.fuse_norm)
    if a.pdl is not None:
        from kernels import common_cuda
        common_cuda.PDL = bool(a.pdl)
    for name in a.shapes.split(","):
        for M in (int(m) for m in a.M.split(",")):
            for ctx in (int(c) for c in a.context.split(",")):
                profile(SHAPES[name], M, ctx, prefill=a.prefill)


if __name__ == "__main__":
    main()
