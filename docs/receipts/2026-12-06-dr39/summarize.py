"""bench-{base,new}N/results.json -> per run: the set's aggregate (wall, per CPU second), each
prompt's ratio and its drafts (chunks, drafted, taken: the server's /metrics counters), prose
and 16 streams; then each side's runs pooled.  python3 .../summarize.py > summary.txt"""
import glob
import json
import os

D = os.path.dirname(os.path.abspath(__file__))
NAMES = ["pool.py", "admission.py", "layout.py", "plan.py", "prompt_cache.py"]


def pool(cells):
    pd = sum(c["plain_decode_secs"] for c in cells)
    dd = sum(c["drafted_decode_secs"] for c in cells)
    n = sum(c["tokens"] - 1 for c in cells)
    pc = sum(c["plain_cpu_secs"] for c in cells)
    dc = sum(c["drafted_cpu_secs"] for c in cells)
    return pd / dd, pc / dc, n / pd, n / dd


side = {"base": [], "new": []}
for f in sorted(glob.glob(f"{D}/bench-*/results.json")):
    run = os.path.basename(os.path.dirname(f))
    s = "base" if "base" in run else "new"
    R = json.load(open(f))
    load = open(f"{D}/{run}.load").read().split("\n")
    cells = [r["edit_set"][n] for r in R["rounds"] for n in NAMES]
    side[s].append(R)
    w, c, p, d = pool(cells)
    print(f"{run}: {load[0]}-{load[2] if len(load) > 2 else '?'} UTC, load {load[1].split()[0]} -> "
          f"{load[3].split()[0] if len(load) > 3 and load[3] else '?'}: set {p:.1f} -> {d:.1f} tok/s, {w:.3f}x wall, "
          f"{c:.3f}x per CPU s")
    for n in NAMES:
        cs = [r["edit_set"][n] for r in R["rounds"]]
        w, c, p, d = pool(cs)
        print(f"    {n:16s} {w:.3f}x ({c:.3f}x CPU)  rounds " + " ".join(f"{x['ratio']:.2f}" for x in cs)
              + f"  chunks/drafted/taken {cs[0]['drafts']:.0f}/{cs[0]['draft_tokens']:.0f}/{cs[0]['accepted']:.0f}"
              + f"  equal {all(x['equal'] for x in cs)}")
    pr = [r["prose"] for r in R["rounds"]]
    x16 = [r["x16"] for r in R["rounds"]]
    print(f"    prose " + " ".join(f"{x['ratio']:.2f}" for x in pr)
          + f" equal {all(x['equal'] for x in pr)};  16 streams " + " ".join(
              f"{x.get('ratio', float('nan')):.2f}" for x in x16))
for s, runs in side.items():
    if not runs:
        continue
    cells = [r["edit_set"][n] for R in runs for r in R["rounds"] for n in NAMES]
    w, c, p, d = pool(cells)
    per = " ".join(f"{n[:-3]} {pool([r['edit_set'][n] for R in runs for r in R['rounds']])[0]:.3f}"
                   for n in NAMES)
    print(f"{s} pooled ({len(runs)} runs): set {w:.3f}x wall, {c:.3f}x per CPU s; {per}")
