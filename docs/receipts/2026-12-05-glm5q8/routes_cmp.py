"""Where the two route diagnoses part: the first (layer, row) whose chosen experts differ, with
both sides' margins there, and the smallest margins overall.
    python3 routes_cmp.py REF.json OURS.json"""
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
print("ref", a.get("mode"), a.get("flip"), "top", a["top"][:3]); print("ours top", b["top"][:3])
print("step-0 max |dlogprob| over ref's top 5:", max(abs(x[1] - dict(b["top"]).get(x[0], 99)) for x in a["top"][:5]))
for li, (ra, rb) in enumerate(zip(a["routes"], b["routes"])):
    dm = [abs(x - y) for x, y, p, q in zip(ra["margin"], rb["margin"], ra["ids"], rb["ids"]) if p == q]
    big = next((r for r, (x, y) in enumerate(zip(ra["margin"], rb["margin"])) if abs(x - y) > 1e-4), None)
    print(f"moe call {li}: max |margin ref - ours| {max(dm):.2e} (rows routed alike), first row over 1e-4: {big}")
    diff = [r for r, (x, y) in enumerate(zip(ra["ids"], rb["ids"])) if x != y]
    m = min(range(len(ra["margin"])), key=lambda r: ra["margin"][r])
    print(f"moe call {li}: rows differing {diff[:6]}{'...' if len(diff) > 6 else ''}; smallest ref margin {ra['margin'][m]:.3e} at row {m}", end="")
    if diff:
        r = diff[0]; print(f"; first diff row {r}: ref {ra['ids'][r]} margin {ra['margin'][r]:.3e}, ours {rb['ids'][r]} margin {rb['margin'][r]:.3e}")
    else:
        print()
