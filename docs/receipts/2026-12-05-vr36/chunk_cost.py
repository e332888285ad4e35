"""CHUNK_COST from bench/drafts_profile.py's JSON: each rep's drafted forward by chunk rows
(median ms) over the same rep's plain one-row forward (median ms), then the mean over reps.
  python3 chunk_cost.py profile_*.json"""
import json, sys
for f in sys.argv[1:]:
    d = json.load(open(f))
    runs = d["runs"] if isinstance(d, dict) and "runs" in d else d
    reps = {}
    for r in runs:
        reps.setdefault(r["rep"], {})[r["drafted"]] = r
    rows = {}
    for rep, two in sorted(reps.items()):
        one = two[False]["forward_ms_by_rows"]["1"]["median"]
        by = two[True]["forward_ms_by_rows"]
        line = {int(k): v["median"] / one for k, v in by.items()}
        for k, v in line.items():
            rows.setdefault(k, []).append(v)
        print(f, "rep", rep, "one-row %.1f ms" % one, "load", two[True].get("loadavg"),
              " ".join("%d:%.2f(n%d)" % (k, line[k], by[str(k)]["n"]) for k in sorted(line)))
    print(f, "mean", " ".join("%d:%.2f" % (k, sum(v) / len(v)) for k, v in sorted(rows.items())))
