"""Medians by side and thread count of an ab.sh log (ab1.log): wall and CPU ms a decode step."""
import json
import statistics as st
import sys

side, rows = None, {}
for line in open(sys.argv[1]):
    if line.startswith("== "):
        side = line.split()[1]
    elif line.startswith("round "):
        rows.setdefault(side, []).append(json.loads(line[6:]))
for s, rs in rows.items():
    for t in sorted({r["threads"] for r in rs}):
        r = [x for x in rs if x["threads"] == t]
        print(f"{s:4} -t {t}: {len(r)} rounds; fused step {st.median(x['fused_ms'] for x in r):.2f} ms wall "
              f"({min(x['fused_ms'] for x in r):.2f} .. {max(x['fused_ms'] for x in r):.2f}), "
              f"{st.median(x['fused_cpu_ms'] for x in r):.2f} ms CPU "
              f"({min(x['fused_cpu_ms'] for x in r):.2f} .. {max(x['fused_cpu_ms'] for x in r):.2f}); "
              f"op-by-op {st.median(x['ops_ms'] for x in r):.2f} ms wall; "
              f"loadavg {min(x['loadavg'] for x in r):.1f} .. {max(x['loadavg'] for x in r):.1f}")
