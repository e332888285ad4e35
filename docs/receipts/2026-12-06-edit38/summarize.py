"""The runs' numbers in one table: per run (bench-N/results.json) the editing set's aggregate
(wall and per CPU second), its geo-mean, the old prompt's median ratio, prose and 16
streams; then every round of every run pooled, per prompt and for the set (the same
arithmetic as bench/drafts.py: decode tokens over decode seconds summed, each side); then
llama-server's runs (llama-N/llama_server.json) per prompt.
  PYTHONPATH=$PWD python docs/receipts/2026-12-06-edit38/summarize.py > summary.txt"""
import glob
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))
import drafts as B  # noqa: E402
from editing import EDIT_SET  # noqa: E402

names = [t.name for t in EDIT_SET]
runs = sorted(glob.glob(os.path.join(HERE, "bench-*/results.json")))
allrows = []
print("ours: run | load start/end (1-min) | set aggregate wall (per CPU s) | geo-mean wall (CPU) | "
      "old prompt median wall (CPU) | per round set wall | prose wall (CPU) | 16 streams wall (CPU) | all equal")
for f in runs:
    name = os.path.basename(os.path.dirname(f))
    d = json.load(open(f))
    rows = d["rounds"]
    allrows += rows
    s = d["summary"]
    agg = s["edit_set"]["aggregate"]
    load = [ln.split()[2] for ln in open(os.path.join(HERE, name + ".load"))]
    per_round = " ".join(f"{B.pooled(r['edit_set'].values())['ratio']:.2f}" for r in rows)
    eq = all(r[k]["equal"] for r in rows for k in ("prose", "x16")) and agg["all_equal"]
    print(f"{name} | {'/'.join(load)} | {agg['ratio']:.2f}x ({agg['cpu_ratio']:.2f}x) | "
          f"{agg['geomean_ratio']:.2f}x ({agg['geomean_cpu_ratio']:.2f}x) | {s['editing']['ratio']:.2f}x "
          f"({s['editing']['cpu_ratio']:.2f}x) | {per_round} | {s['prose']['ratio']:.2f}x "
          f"({s['prose']['cpu_ratio']:.2f}x) | {s['x16']['ratio']:.2f}x ({s['x16']['cpu_ratio']:.2f}x) | {eq}")
aggs = [json.load(open(f))["summary"]["edit_set"]["aggregate"] for f in runs]
print(f"median of the {len(runs)} runs' set aggregates: {statistics.median(a['ratio'] for a in aggs):.2f}x wall, "
      f"{statistics.median(a['cpu_ratio'] for a in aggs):.2f}x per CPU s")
quiet = []
for f in runs:
    name = os.path.basename(os.path.dirname(f))
    if all(float(ln.split()[2]) <= 2.5 for ln in open(os.path.join(HERE, name + ".load"))):
        quiet.append((name, json.load(open(f))["rounds"]))
qrows = [r for _, rs in quiet for r in rs]
q = B.pooled([r["edit_set"][n] for r in qrows for n in names])
qper = {n: B.pooled([r["edit_set"][n] for r in qrows]) for n in names}
print(f"the runs with 1-min load <= 2.5 at start and end ({', '.join(n for n, _ in quiet)}; {len(qrows)} rounds) "
      f"pooled: set aggregate {q['plain_tps']:.1f} / {q['drafted_tps']:.1f} tok/s, {q['ratio']:.2f}x wall, "
      f"{q['cpu_ratio']:.2f}x per CPU s; geo-mean {B.geomean(qper[n]['ratio'] for n in names):.2f}x; per prompt "
      + ", ".join(f"{n} {qper[n]['ratio']:.2f}x" for n in names))
print(f"\nours, all {len(allrows)} rounds pooled, per prompt: plain / drafted tok/s (wall), ratio wall, "
      "ratio per CPU s, median of per-round ratios wall (CPU), acceptance, tokens per verify, all equal")
per = {}
for n in names:
    cells = [r["edit_set"][n] for r in allrows]
    p = per[n] = B.pooled(cells)
    tpv = cells[0]["tokens_per_verify"]
    print(f"{n}: {p['plain_tps']:.1f} / {p['drafted_tps']:.1f}, {p['ratio']:.2f}x, {p['cpu_ratio']:.2f}x, "
          f"{statistics.median(c['ratio'] for c in cells):.2f}x ({statistics.median(c['cpu_ratio'] for c in cells):.2f}x), "
          f"{p['acceptance']:.2f}, {tpv:.2f}, {p['all_equal']}")
agg = B.pooled([r["edit_set"][n] for r in allrows for n in names])
print(f"set aggregate: {agg['plain_tps']:.1f} / {agg['drafted_tps']:.1f} tok/s, {agg['ratio']:.2f}x wall, "
      f"{agg['cpu_ratio']:.2f}x per CPU s; geo-mean of per-prompt ratios "
      f"{B.geomean(per[n]['ratio'] for n in names):.2f}x wall, {B.geomean(per[n]['cpu_ratio'] for n in names):.2f}x CPU; "
      f"all equal {agg['all_equal']}")
print("old prompt (pool.py), median of all rounds' ratios: "
      f"{statistics.median(r['editing']['ratio'] for r in allrows):.2f}x wall, "
      f"{statistics.median(r['editing']['cpu_ratio'] for r in allrows):.2f}x per CPU s")
for k in ("prose", "x16"):
    print(f"{k}, median of all rounds' ratios: {statistics.median(r[k]['ratio'] for r in allrows):.2f}x wall, "
          f"{statistics.median(r[k]['cpu_ratio'] for r in allrows):.2f}x per CPU s, all equal "
          f"{all(r[k]['equal'] for r in allrows)}")

print("\nllama-server (peer (a), -t 2): per prompt, each run's plain -> ngram-simple tok/s (its own "
      "timings); drafted == its own plain")
lruns = sorted(glob.glob(os.path.join(HERE, "llama-*/llama_server.json")))
lr = {os.path.basename(os.path.dirname(f)): json.load(open(f))["runs"] for f in lruns}
for n in names + ["prose"]:
    cells, eqs, good = [], [], {"none": [], "ngram-simple": []}
    for rn, rs in lr.items():
        p = next(r for r in rs if r["prompt"] == n and r["spec"] == "none")
        d = next(r for r in rs if r["prompt"] == n and r["spec"] == "ngram-simple")
        cells.append(f"{p['tps']:.1f}->{d['tps']:.1f}")
        eqs.append(p["text"] == d["text"])
        for r in (p, d):
            if r["tps"] >= 20:
                good[r["spec"]].append(r["tps"])
    med = {k: statistics.median(v) if v else float("nan") for k, v in good.items()}
    firsts = sorted({next((i for i, (x, y) in enumerate(zip(p["text"], d["text"])) if x != y),
                          min(len(p["text"]), len(d["text"])))
                     for rs in lr.values()
                     for p, d in [(next(r for r in rs if r["prompt"] == n and r["spec"] == s)
                                   for s in ("none", "ngram-simple"))]
                     if p["text"] != d["text"]})
    ours = [r["edit_set"][n]["drafted_tps"] if n != "prose" else r["prose"]["drafted_tps"] for r in allrows]
    print(f"{n}: {' '.join(cells)}; medians without the collapsed (<20 tok/s) requests "
          f"{med['none']:.1f} -> {med['ngram-simple']:.1f} ({med['ngram-simple'] / med['none']:.2f}x); "
          f"equal {sum(eqs)} of {len(eqs)}" + (f" (first differing character {firsts})" if firsts else "")
          + f"; ours drafted, median of the rounds {statistics.median(ours):.1f} tok/s")
tot = {}
for sp in ("none", "ngram-simple"):
    ed = [r for rs in lr.values() for r in rs if r["kind"] == "editing" and r["spec"] == sp and r["tps"] >= 20]
    tot[sp] = (sum(r["predicted_n"] for r in ed) / (sum(r["predicted_ms"] for r in ed) / 1e3), len(ed))
print(f"llama-server set aggregate without the collapsed requests: plain {tot['none'][0]:.1f} tok/s "
      f"({tot['none'][1]} requests), ngram-simple {tot['ngram-simple'][0]:.1f} ({tot['ngram-simple'][1]}): "
      f"{tot['ngram-simple'][0] / tot['none'][0]:.2f}x")
