"""One process, one engine: the fused round's verify chunks of 1..N rows timed with the attend
steps' HALVE flag off (main's jobs) and on (the last job's rows halved), alternated rep by rep
and case by case, at ~1,000 keys as bench/verify_rows.py. Medians in ms and new / main.

  PYTHONPATH=$PWD python docs/receipts/2026-12-06-dr39/halve_ab.py [--sizes 1,2,..] [--reps 9]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.getcwd())


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--sizes", default="1,2,3,4,5,6,7,8,9")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from server.engine.build import open_model
    import kernels
    kernels.init()
    from kernels import forward_cpu as fc
    from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep
    eng = open_model(None, progress=False).engine
    fused = eng.model.fused
    on = fused.prog.copy()
    att = on[:, :, 0] == fc._ATTEND
    assert att.any()
    on[:, :, 2][att] |= fc.HALVE
    off = on.copy()
    off[:, :, 2][att] &= ~fc.HALVE
    progs = {"main": off, "halve": on}
    eng.apply(PoolStep(True, 1200, 16, (eng.page_bytes(16),), 9, 2048))
    eng.apply(BeginStep(0, tuple(range(0, 128))))
    ids = list(range(100, 1100))
    for s in range(0, 1000, 500):
        eng.apply(RoundStep((Chunk(0, s, tuple(ids[s:s + 500]), False),)))
    sizes = [int(v) for v in a.sizes.split(",")]
    steps = {k: RoundStep((Chunk(0, 1000, tuple(ids[:k]), EVERY_ROW),)) for k in sizes}
    times = {(v, k): [] for v in progs for k in sizes}
    logits = {}
    for v, p in progs.items():                       # warm; the logits of each
        fused.prog = p
        for k in sizes:
            logits[(v, k)] = eng.apply(steps[k]).tobytes()
    for k in sizes:
        assert logits[("main", k)] == logits[("halve", k)], f"{k} rows: logits differ"
    for rep in range(a.reps):
        order = list(progs) if rep % 2 == 0 else list(progs)[::-1]
        for k in sizes:
            for v in order:
                fused.prog = progs[v]
                t0 = time.perf_counter()
                eng.apply(steps[k])
                times[(v, k)].append(time.perf_counter() - t0)
    fused.prog = on
    out = {}
    for k in sizes:
        med = {v: sorted(times[(v, k)])[len(times[(v, k)]) // 2] * 1e3 for v in progs}
        out[k] = med
        print(f"1x{k:<2d} main {med['main']:6.2f} ms  halve {med['halve']:6.2f} ms  "
              f"halve/main {med['halve'] / med['main']:.3f}")
    print("loadavg", os.getloadavg())
    if a.out:
        json.dump({"medians_ms": out, "loadavg": os.getloadavg()}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
