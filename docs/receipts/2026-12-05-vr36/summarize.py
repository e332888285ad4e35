"""The server runs of this receipt side by side: per run (bench-*/results.json, the load
beside it in bench-*.load) the medians of the per-round ratios, each round's ratios, and
whether every drafted reply equalled its plain twin; then the pooled medians of each tree.

  python3 docs/receipts/2026-12-05-vr36/summarize.py
"""
import glob
import json
import os
import statistics as st

D = os.path.dirname(os.path.abspath(__file__))
pool = {}
for path in sorted(glob.glob(f"{D}/bench-*/results.json")):
    run = os.path.basename(os.path.dirname(path))
    r = json.load(open(path))
    load = open(f"{D}/{run}.load").read().split("\n") if os.path.exists(f"{D}/{run}.load") else ["?"] * 4
    la = [l.split()[0] for l in load if l and l[0].isdigit()]
    when = [l.split()[3] for l in load if l.startswith("Sat")]
    print(f"{run}  {'-'.join(when)} UTC, load {' -> '.join(la)}")
    for k in ("editing", "prose", "x16"):
        w = [x[k]["ratio"] for x in r["rounds"]]
        c = [x[k]["cpu_ratio"] for x in r["rounds"]]
        eq = all(x[k]["equal"] for x in r["rounds"])
        extra = ""
        if k != "x16":
            x = r["rounds"][0][k]
            extra = f"  drafted {x['draft_tokens']:.0f} taken {x['accepted']:.0f} in {x['drafts']:.0f} chunks"
            extra += f"  drafted tok/s {st.median(y[k]['drafted_tps'] for y in r['rounds']):.1f}"
            extra += f" plain {st.median(y[k]['plain_tps'] for y in r['rounds']):.1f}"
        print(f"  {k:8s} wall {st.median(w):.2f}x ({' '.join(f'{v:.2f}' for v in w)})  "
              f"per CPU s {st.median(c):.2f}x ({' '.join(f'{v:.2f}' for v in c)})  equal={eq}{extra}")
        side = ("k" if run.startswith("bench-k") else "base" if run.startswith("bench-base")
                else "new" if run == "bench-new1" else None)     # bench-new2: my tests beside it
        if side:
            pool.setdefault((side, k), ([], []))
            pool[(side, k)][0].extend(w)
            pool[(side, k)][1].extend(c)
print("pooled (k = vr36 0bb7aed, new = 008269f, bench-new1 only, base = main 7f22113), medians of the rounds:")
for (side, k), (w, c) in sorted(pool.items()):
    print(f"  {side:4s} {k:8s} wall {st.median(w):.2f}x  per CPU s {st.median(c):.2f}x  "
          f"(wall min {min(w):.2f} max {max(w):.2f})")
