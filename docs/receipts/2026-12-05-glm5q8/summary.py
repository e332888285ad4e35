"""The pairs' table and medians from pair-p*.json (pair.py): a side counts as quiet when the
other processes used at most 0.05 cores during it; a ratio counts when both its sides were
quiet. python3 summary.py"""
import json, statistics as st
from pathlib import Path
here = Path(__file__).resolve().parent
rows = []
for p in sorted(here.glob("pair-p*.json")):
    for r in json.loads(p.read_text()):
        rows.append((p.stem[5:], r))
by = {}
for run, r in rows:
    by.setdefault((run, r["round"]), {})[r["side"]] = r
Q = 0.05
print("| run | round | llama.cpp tg | q8_0 x tg | float x tg | llama.cpp pp512 | q8_0 x pp512 | float x pp512 | others' cores (llama / q8 / float) |")
print("|---|---|---|---|---|---|---|---|---|")
ratios = {k: [] for k in ("tg q8/llama", "pp q8/llama", "tg float/llama", "pp float/llama", "tg q8/float", "pp q8/float")}
for (run, rd), s in sorted(by.items()):
    if len(s) < 3:
        continue
    L, A, B = s["llama_cpp"], s["q8_0_x"], s["float_x"]
    q = {k: v["cpu"]["others"] <= Q for k, v in s.items()}
    mark = lambda k: "" if q[k] else "*"
    print(f"| {run} | {rd} | {L['tg']:.2f}{mark('llama_cpp')} | {A['tg']:.2f}{mark('q8_0_x')} | {B['tg']:.2f}{mark('float_x')} | "
          f"{L['pp512']:.2f}{mark('llama_cpp')} | {A['pp512']:.2f}{mark('q8_0_x')} | {B['pp512']:.2f}{mark('float_x')} | "
          f"{L['cpu']['others']:.2f} / {A['cpu']['others']:.2f} / {B['cpu']['others']:.2f} |")
    for num, den, tag in (("q8_0_x", "llama_cpp", "q8/llama"), ("float_x", "llama_cpp", "float/llama"), ("q8_0_x", "float_x", "q8/float")):
        if q[num] and q[den]:
            ratios["tg " + tag].append(s[num]["tg"] / s[den]["tg"])
            ratios["pp " + tag].append(s[num]["pp512"] / s[den]["pp512"])
print("(* : others above 0.05 cores during that side: not quiet)\n")
for k, v in ratios.items():
    if v:
        print(f"{k}: median {st.median(v):.2f}x, range {min(v):.2f}-{max(v):.2f} over {len(v)} quiet pairs")
for side in ("llama_cpp", "q8_0_x", "float_x"):
    vs = [r for _, r in rows if r["side"] == side and r["cpu"]["others"] <= Q]
    if vs:
        print(f"{side}: quiet rounds {len(vs)}: tg median {st.median(v['tg'] for v in vs):.2f} "
              f"(range {min(v['tg'] for v in vs):.2f}-{max(v['tg'] for v in vs):.2f}), pp512 median "
              f"{st.median(v['pp512'] for v in vs):.2f} (range {min(v['pp512'] for v in vs):.2f}-{max(v['pp512'] for v in vs):.2f})")
