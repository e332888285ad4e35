# the quiet rounds (pair-*.json: each side gated; bench-q*.json: the round gated) as one table
import json, glob, statistics as st, sys
R = "/tmp/glm53q-bench/r/"
commit = {"q1": "ccd10e6", "q2": "ccd10e6", "q3": "7411ff7", "p1": "7411ff7", "p2": "7411ff7", "p3": "64ca887"}
rows = []
for tag in ("q1", "q2", "q3"):
    for r in json.load(open(R + f"bench-{tag}.json")):
        for i, p in enumerate(r["rounds"]):
            L, F, c = p["llama_cpp"], p["foldserve"], p["cpu"]
            rows.append((tag, i + 1, commit[tag], L["tg"], F["tg"], L["pp512"], F["pp512"],
                         c["llama_cpp"]["ours"], c["llama_cpp"]["others"], c["foldserve"]["ours"], c["foldserve"]["others"]))
for tag in ("p1", "p2", "p3"):
    try:
        d = json.load(open(R + f"pair-{tag}.json"))
    except FileNotFoundError:
        continue
    by = {}
    for x in d:
        by.setdefault(x["round"], {})[x["side"]] = x
    for rn, s in sorted(by.items()):
        if len(s) < 2:
            continue
        L, F = s["llama_cpp"], s["foldserve"]
        rows.append((tag, rn, commit[tag], L["tg"], F["tg"], L["pp512"], F["pp512"], L["cpu"]["ours"],
                     L["cpu"]["others"], F["cpu"]["ours"], F["cpu"]["others"]))
print("| run | round | commit | llama.cpp tg | foldserve tg | tg ratio | llama.cpp pp512 | foldserve pp512 | pp512 ratio | cores: llama.cpp (others) | foldserve incl. load (others) |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
fair = []
for t in rows:
    tag, rn, cm, lt, ft, lp, fp, lc, lo, fc, fo = t
    ok = lo <= 0.05 and fo <= 0.05
    if ok:
        fair.append(t)
    print(f"| {tag} | {rn} | {cm} | {lt:.2f} | {ft:.2f} | {ft / lt:.2f}x | {lp:.2f} | {fp:.2f} | {fp / lp:.2f}x | {lc:.2f} ({lo:.2f}) | {fc:.2f} ({fo:.2f}){'' if ok else ' not quiet'} |")
def s(xs):
    return f"median {st.median(xs):.2f}, range {min(xs):.2f}-{max(xs):.2f}"
print(f"\nquiet rounds (others <= 0.05 cores on both sides): {len(fair)}")
for name, i, j in (("llama.cpp tg", 3, None), ("foldserve tg", 4, None), ("llama.cpp pp512", 5, None), ("foldserve pp512", 6, None)):
    print(f"  {name}: {s([t[i] for t in fair])}")
print(f"  tg ratio: {s([t[4] / t[3] for t in fair])}")
print(f"  pp512 ratio: {s([t[6] / t[5] for t in fair])}")
print(f"  ratio of medians: tg {st.median([t[4] for t in fair]) / st.median([t[3] for t in fair]):.2f}x, pp512 {st.median([t[6] for t in fair]) / st.median([t[5] for t in fair]):.2f}x")
fin = [t for t in fair if t[2] in ("ccd10e6", "64ca887")]
if fin:
    print(f"  final engine code (ccd10e6 = 64ca887) only, {len(fin)} rounds: tg ratio {s([t[4] / t[3] for t in fin])}; pp512 ratio {s([t[6] / t[5] for t in fin])}")
