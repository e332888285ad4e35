"""What a verify chunk costs on this machine (server/drafts/policy.py's ROW_COST): the
default model's forward alone, a round of one stream's chunk of 1 / 3 / 5 / 9 rows with
every row's logits (a verify chunk: the last token and 0 / 2 / 4 / 8 drafts) against a
round of 1 / 3 / 5 / 9 streams' one decode row each, all at ~1,000 keys, the cases
alternated rep by rep; medians and minimums in ms, and the row cost
(t(1x9) / t(1x1) - 1) / 8.

  python3 bench/verify_rows.py [--reps 7] [--out FILE.json]
  python3 bench/verify_rows.py --sizes 1,2,3,4,5,8,9   # one stream's chunk of each size only
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=None)
    ap.add_argument("--sizes", default=None,
                    help="comma-separated chunk sizes: one stream's chunk of each (1xK) only")
    a = ap.parse_args(argv)
    from server.engine.build import open_model
    from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep
    eng = open_model(None, progress=False).engine
    eng.apply(PoolStep(True, 1200, 16, (eng.page_bytes(16),), 9, 2048))
    for s in range(9):
        eng.apply(BeginStep(s, tuple(range(s * 128, s * 128 + 128))))
    ids = list(range(100, 1100))
    for st in range(9):                               # 1,000 rows of context a stream
        for s in range(0, 1000, 500):
            eng.apply(RoundStep((Chunk(st, s, tuple(ids[s:s + 500]), False),)))
    cases = {}
    if a.sizes:
        for k in (int(v) for v in a.sizes.split(",")):
            cases[f"1x{k}"] = (Chunk(0, 1000, tuple(ids[:k]), EVERY_ROW),)
    else:
        for k in (1, 3, 5, 9):
            cases[f"1x{k}"] = (Chunk(0, 1000, tuple(ids[:k]), EVERY_ROW),)
            cases[f"{k}x1"] = tuple(Chunk(s, 1000, (ids[s],), True) for s in range(k))
    times = {c: [] for c in cases}
    for c, step in cases.items():                     # warm
        eng.apply(RoundStep(step))
    for _ in range(a.reps):
        for c, step in cases.items():
            t0 = time.perf_counter()
            eng.apply(RoundStep(step))
            times[c].append(time.perf_counter() - t0)
    out = {}
    for c, ts in times.items():
        ts.sort()
        out[c] = {"median_ms": ts[len(ts) // 2] * 1e3, "min_ms": ts[0] * 1e3}
        print(f"{c:5s} median {out[c]['median_ms']:7.1f} ms  min {out[c]['min_ms']:7.1f} ms")
    one = out["1x1"]["median_ms"]
    for c, v in out.items():
        k = int(c.split("x")[1]) if c.startswith("1x") else 1
        if k > 1:
            print(f"{c:5s} = {v['median_ms'] / one:.2f} one-row rounds; per extra row "
                  f"{(v['median_ms'] / one - 1) / (k - 1):.2f}")
    big = max((c for c in out if c.startswith("1x")), key=lambda c: int(c[2:]))
    n = int(big[2:])
    row = (out[big]["median_ms"] / one - 1) / max(1, n - 1)
    print(f"row cost ({big} / 1x1 - 1) / {n - 1} = {row:.2f}; loadavg {os.getloadavg()}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"cases": out, "row_cost": row, "loadavg": os.getloadavg()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
