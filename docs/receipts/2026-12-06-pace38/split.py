"""trace-N.json -> the ratio split per prompt and rep: replay@CHUNK_COST, the forward ratio,
the measured wall ratio, and the forward gap's ms by chunk rows (each size's ms over
CHUNK_COST[rows] x plain's mean one-row round), as a share of the drafted forward.

  python3 docs/receipts/2026-12-06-pace38/split.py trace-1.json [...]
"""
import json
import sys

for f in sys.argv[1:]:
    R = json.load(open(f))
    print(f"== {f}")
    print(f"{'prompt':15s} rep load  plain>drafted tok/s  measured fwd-ratio replay@CC gap  "
          f"same  1-row d/p ms (after 1 / after chunk)  excess ms by rows (share of drafted fwd)")
    tot = {}
    for r in R:
        ex = {k: v["excess_ms"] for k, v in r["by_rows"].items()}
        for k, v in ex.items():
            tot[k] = tot.get(k, 0.0) + v
        tot["fwd"] = tot.get("fwd", 0.0) + r["drafted_fwd_ms"]
        cs = " ".join(f"{k}:{v:+.0f}({v / r['drafted_fwd_ms']:+.1%})" for k, v in ex.items())
        print(f"{r['prompt']:15s} {r['rep']}  {r['loadavg'][0]:.2f} {r['plain_tps']:6.1f}>{r['drafted_tps']:6.1f}  "
              f"{r['measured']:.3f}  {r['forward_ratio']:.3f}  {r['replay_chunk_cost']:.3f}  "
              f"{r['replay_chunk_cost'] / r['forward_ratio']:.3f}  {r['replay_same_rounds']}  "
              f"{r['by_rows']['1']['mean_ms']:.2f}/{r['plain_row_ms']:.2f} "
              f"({r['one_row_after_one_ms']:.2f} n{r['n_after'][0]} / {r['one_row_after_chunk_ms']:.2f} n{r['n_after'][1]})  {cs}")
        print(f"{'':20s}cost vs plain's one-row round by rows: " + " ".join(
            f"{k}:{v['cost_vs_plain']:.2f}(T {v['table']:.2f}, n{v['n']})" for k, v in r["by_rows"].items()))
    print("all: excess ms by rows, share of the drafted forward: " + " ".join(
        f"{k}:{v / tot['fwd']:+.1%}" for k, v in tot.items() if k != "fwd"))
