"""alt.sh's output -> each run's decode step and ops.moe (ms), then the medians by tree."""
import re
import statistics as st
import sys

runs, cur = [], None
for ln in open(sys.argv[1]):
    if ln.startswith("== round"):
        f = ln.split()
        cur = {"round": f[2], "tree": f[3], "load": ln.split("load")[1].split()[0]}
        runs.append(cur)
    elif cur is not None:
        m = re.match(r"decode b1: ([\d.]+) ms a step .* on ([\d.]+) cores", ln)
        if m:
            cur["step"], cur["cores"] = float(m[1]), m[2]
        m = re.match(r"\s+ops\.moe\s+([\d.]+) ms", ln)
        if m and "moe" not in cur:
            cur["moe"] = float(m[1])
        m = re.match(r"\s+ops\.linear \(F32, \d+ rows\)\s+([\d.]+) ms", ln)
        if m and "router" not in cur:
            cur["router"] = float(m[1])
for r in runs:
    print(f"round {r['round']} {r['tree']} load {r['load']} cores {r.get('cores')} step {r.get('step')} "
          f"moe {r.get('moe')} router(linear F32) {r.get('router', '-')}")
for t in dict.fromkeys(r["tree"] for r in runs):
    got = [r for r in runs if r["tree"] == t and "step" in r]
    print(f"{t}: n {len(got)} median step {st.median(r['step'] for r in got):.2f} ms, "
          f"median ops.moe {st.median(r['moe'] for r in got):.2f} ms "
          f"(ops.moe min {min(r['moe'] for r in got):.2f} max {max(r['moe'] for r in got):.2f})")
