"""One line per result of bench/multi_gpu.py's results.json (the device scripts print it):
throughput, TPOT and TTFT of the speed runs, the exits, tables, KV and messages of the others.

  python3 bench/multi_summary.py results.json
"""
import json
import sys

R = json.load(open(sys.argv[1]))
for k, v in R.items():
    if isinstance(v, dict) and "output_throughput" in v:
        print(k, "tok/s %.1f" % v["output_throughput"], "tpot p50 %.2f p99 %.2f" % (v["tpot_ms"]["median"], v["tpot_ms"]["p99"]),
              "ttft p50 %.0f p99 %.0f" % (v["ttft_ms"]["median"], v["ttft_ms"]["p99"]), "failed", v["failed"])
    elif k.endswith(("_exit", "_ok", "_tables", "_kv", "_messages")) or k == "allreduce":
        print(k, str(v)[:300])
