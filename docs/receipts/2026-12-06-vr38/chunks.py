"""Print each drafts_profile run's forward ms by chunk rows, and over the plain run's one-row median of the same rep."""
import json, sys
for path in sys.argv[1:]:
    d = json.load(open(path))
    reps = {}
    for r in d["runs"]:
        reps.setdefault(r["rep"], {})["drafted" if r["drafted"] else "plain"] = r
    for rep, x in sorted(reps.items()):
        one = x["plain"]["forward_ms_by_rows"]["1"]["median"]
        fb = x["drafted"]["forward_ms_by_rows"]
        print(f"{path.split('/')[-1]:22s} rep {rep} plain 1-row {one:5.2f} ms, drafted tok/s {x['drafted']['decode_tps']:.1f} plain {x['plain']['decode_tps']:.1f} | "
              + "  ".join(f"{k}: {v['median']:5.2f} ({v['median']/one:.2f})" for k, v in sorted(fb.items(), key=lambda kv: int(kv[0]))))
