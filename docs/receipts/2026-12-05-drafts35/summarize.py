"""Each bench/drafts.py run of this receipt: per-round ratios (wall, per CPU second) and their
medians, the run's load average at its end (its log has the start's).

  python3 docs/receipts/2026-12-05-drafts35/summarize.py
"""
import glob
import json
import statistics

D = "docs/receipts/2026-12-05-drafts35"
for d in sorted(glob.glob(D + "/bench-*")):
    j = json.load(open(d + "/results.json"))
    print(d.split("/")[-1], " ".join(j["server_flags"]), "load at end", [round(x, 2) for x in j["loadavg"]])
    for case in ("editing", "prose", "x16"):
        w = [r[case]["ratio"] for r in j["rounds"]]
        c = [r[case]["cpu_ratio"] for r in j["rounds"]]
        eq = all(r[case]["equal"] for r in j["rounds"])
        tps = [f"{r[case]['plain_tps']:.0f}->{r[case]['drafted_tps']:.0f}" for r in j["rounds"]]
        print(f"  {case:7s} wall {' '.join(f'{x:.2f}' for x in w)} (median {statistics.median(w):.2f})"
              f"  cpu {' '.join(f'{x:.2f}' for x in c)} (median {statistics.median(c):.2f})"
              f"  tok/s {' '.join(tps)}  equal {eq}")
