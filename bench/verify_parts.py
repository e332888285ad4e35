"""Where an extra row of one stream's verify chunk goes, on the default model's fused CPU round
(kernels/forward_cpu.py): the round's forward run again on the same rows with programs that
keep one kind of stage (each layer's norms, qkv, attend, o, gate_up + SwiGLU, down), the head
on every row / the last row / none, and the Python around it (rows, plan, embed, buffers),
chunks of each size alternated rep by rep; medians in ms and each part's cost an extra row.

A part alone reads buffers an earlier stage would have written (zeros here): the times are
the stage's work at these shapes, not its bytes. The parts' sum against the whole round is
printed (the waits between stages are in both).

  python3 bench/verify_parts.py [--keys 40] [--sizes 1,2,4,8,9] [--reps 7] [--out FILE.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=40)
    ap.add_argument("--sizes", default="1,2,4,8,9")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    import numba
    import numpy as np

    import kernels
    kernels.init()
    from kernels import forward_cpu as fc
    from kernels.team_cpu import REGION, WIDTH
    from server.engine.build import open_model
    from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep
    eng = open_model(None, progress=False).engine
    model = eng.model
    fused = model.fused
    assert fused is not None, "the default model's round is not fused here"
    keys = a.keys
    eng.apply(PoolStep(True, (keys + 64) // 16 + 8, 16, (eng.page_bytes(16),), 1, keys + 64))
    eng.apply(BeginStep(0, tuple(range((keys + 64) // 16 + 8))))
    ids = list(range(100, 100 + keys + 32))
    for s in range(0, keys, 500):
        eng.apply(RoundStep((Chunk(0, s, tuple(ids[s:min(keys, s + 500)]), False),)))
    sizes = [int(v) for v in a.sizes.split(",")]
    caught = {}
    fwd = model.forward

    def catch(chunks, kv):
        caught["c"] = (chunks, kv)
        return fwd(chunks, kv)
    model.forward = catch
    prep = {}
    for k in sizes:
        eng.apply(RoundStep((Chunk(0, keys, tuple(ids[keys:keys + k]), EVERY_ROW),)))
        prep[k] = caught["c"]
    model.forward = fwd
    L = fused.prog.shape[0]
    codes = {"norm": fc._NORM, "qkv": fc._QKV, "attend": fc._ATTEND, "o": fc._O,
             "gate_up_swiglu": fc._GATE_UP_SWIGLU, "down": fc._DOWN}

    def only(code):
        p = np.zeros_like(fused.prog)
        for li in range(L):
            j = 0
            for st in range(fused.prog.shape[1]):
                if fused.prog[li, st, 0] == code:
                    p[li, j] = fused.prog[li, st]
                    j += 1
        return p
    progs = {name: only(c) for name, c in codes.items()}
    progs["head"] = np.zeros_like(fused.prog)
    nthreads = min(numba.get_num_threads(), WIDTH - REGION)

    def run_prog(k, prog, sel):
        chunks, kv = prep[k]
        r = model.rows(chunks)
        h = np.ascontiguousarray(model.ops.embed(model.w.embed, r.ids), np.float32)
        T, D = h.shape
        w = fused.w
        S = 0 if sel is None else len(sel)
        nq, nkv, hd, ff = w.nq, w.nkv, w.hd, w.ff
        f32 = np.float32
        z = np.zeros
        b = fc.Bufs(h, z((T, D), f32), z((T, D), f32), z((T, D), f32),
                    z((T, (nq + 2 * nkv) * hd), f32), z((T, nq, hd), f32),
                    z((T, 2 * ff), f32), z((T, ff), f32),
                    z((T, D // 32), f32), z((T, nq * hd // 32), f32), z((T, ff // 32), f32),
                    z((S, D), f32), z((S, D), f32), z((S, D), f32), z((S, D), f32),
                    z((S, D // 32), f32), z((S, fused.vocab), f32))
        cos, sin, spans, starts, tables, page_rows = r.cpu
        rows = fc.Rows(kv.K, kv.V, fc.attention_cpu.owners(spans, T), cos, sin, spans, starts,
                       tables, page_rows, f32(model.scale),
                       np.zeros(0, np.int64) if sel is None else np.asarray(sel, np.int64))
        ctr = np.zeros((fused.counters, WIDTH), np.int64)
        t0 = time.perf_counter()
        fused.team.run(nthreads, (ctr, prog, b, w, rows))
        return time.perf_counter() - t0

    def whole(k):
        chunks, kv = prep[k]
        t0 = time.perf_counter()
        model.forward(chunks, kv)
        return time.perf_counter() - t0

    def python(k):                        # the round's Python before the crew runs
        chunks, kv = prep[k]
        t0 = time.perf_counter()
        r = model.rows(chunks)
        model.ops.embed(model.w.embed, r.ids)
        return time.perf_counter() - t0

    cases = {"forward (engine)": lambda k: whole(k),
             "program, every row's logits": lambda k: run_prog(k, fused.prog, list(range(k))),
             "program, the last row's logits": lambda k: run_prog(k, fused.prog, [k - 1]),
             "program, no logits": lambda k: run_prog(k, fused.prog, None),
             "python (rows, plan, embed)": python}
    for name, p in progs.items():
        if name == "head":
            cases["head alone, every row"] = lambda k, p=p: run_prog(k, p, list(range(k)))
        else:
            cases[f"{name} alone"] = lambda k, p=p: run_prog(k, p, None)
    times = {c: {k: [] for k in sizes} for c in cases}
    for c, f in cases.items():                               # warm
        for k in sizes:
            f(k)
    load0 = open("/proc/loadavg").read().split()[:3]
    for _ in range(a.reps):
        for k in sizes:
            for c, f in cases.items():
                times[c][k].append(f(k))
    load1 = open("/proc/loadavg").read().split()[:3]
    out = {"keys": keys, "sizes": sizes, "reps": a.reps, "threads": nthreads,
           "loadavg_before": load0, "loadavg_after": load1, "median_ms": {}}
    k0, k1 = sizes[0], sizes[-1]
    print(f"keys {keys}, threads {nthreads}, loadavg {' '.join(load0)} -> {' '.join(load1)}")
    print(f"{'part':34s}" + "".join(f"{'1x%d' % k:>9s}" for k in sizes) + "   per extra row")
    for c in cases:
        med = {k: statistics.median(times[c][k]) * 1e3 for k in sizes}
        out["median_ms"][c] = med
        per = (med[k1] - med[k0]) / (k1 - k0)
        print(f"{c:34s}" + "".join(f"{med[k]:9.2f}" for k in sizes) + f"   {per:7.2f} ms")
    parts = [c for c in cases if c.endswith("alone") or c.startswith("head alone")]
    sums = {k: sum(out["median_ms"][c][k] for c in parts) for k in sizes}
    print(f"{'sum of the parts':34s}" + "".join(f"{sums[k]:9.2f}" for k in sizes)
          + f"   {(sums[k1] - sums[k0]) / (k1 - k0):7.2f} ms")
    if a.out:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
