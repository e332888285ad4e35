"""The server runs of this receipt: per run (bench-*/results.json, its load in bench-*.load)
each round's editing / prose / 16-stream ratios (wall; per CPU second), drafted and plain
tok/s, and whether every drafted reply equalled its plain twin; then each tree's pooled
medians.

  python3 docs/receipts/2026-12-06-vr38/summarize.py
"""
import glob
import json
import os
import statistics as st

D = os.path.dirname(os.path.abspath(__file__))
pool = {}
for path in sorted(glob.glob(f"{D}/bench-*/results.json"), key=lambda p: (p[-15], p)):
    run = os.path.basename(os.path.dirname(path))
    r = json.load(open(path))
    load = [l for l in open(f"{D}/{run}.load").read().split("\n") if l]
    print(f"{run}: {load[0].split()[3]} UTC load {load[1].split()[0]} -> {load[3].split()[0]}")
    side = "new" if "new" in run else "base"
    for x in r["rounds"]:
        e, p, s = x["editing"], x["prose"], x["x16"]
        eq = e["equal"] and p["equal"] and s["equal"]
        print(f"  editing {e['ratio']:.2f} ({e['cpu_ratio']:.2f})  drafted {e['drafted_tps']:.1f} plain "
              f"{e['plain_tps']:.1f} tok/s | prose {p['ratio']:.2f} ({p['cpu_ratio']:.2f}) | 16x "
              f"{s['ratio']:.2f} ({s['cpu_ratio']:.2f}) | all equal {eq}")
        for k, v in (("editing", e["ratio"]), ("editing_cpu", e["cpu_ratio"]), ("drafted", e["drafted_tps"]),
                     ("plain", e["plain_tps"]), ("prose", p["ratio"]), ("x16", s["ratio"])):
            pool.setdefault((side, k), []).append(v)
for side in ("new", "base"):
    print(f"pooled {side}: " + "  ".join(f"{k} {st.median(pool[(side, k)]):.2f}" for k in
                                         ("editing", "editing_cpu", "drafted", "plain", "prose", "x16"))
          + f"  ({len(pool[(side, 'editing')])} rounds)")
