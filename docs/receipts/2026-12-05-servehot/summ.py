import json, sys, glob, statistics as S
O = sys.argv[1]; pre = sys.argv[2]; trees = sys.argv[3].split(",")
keys = ["client_tpot_ms", "ms_a_token", "one_row_step_ms", "period_ms", "outside_ms", "take_ms", "emit_ms", "build_ms", "round_rest_ms", "loop_ms", "client_cpu_ms_a_token"]
for w in ("stream", "plain"):
    print(f"-- {pre} {w}")
    for t in trees:
        rs = []
        for f in sorted(glob.glob(f"{O}/{pre}_{t}_*.json")):
            d = json.load(open(f))
            if w in d: rs.append(d[w])
        if not rs: continue
        line = {k: [r.get(k) for r in rs] for k in keys}
        print(f"{t:6s} n={len(rs)} " + "  ".join(f"{k}={S.median(v):.3f} {v}" for k, v in line.items() if None not in v))
        cpu = {}
        for r in rs:
            for k, v in r["cpu_ms_a_token"].items(): cpu.setdefault(k, []).append(v)
        print("       cpu/token medians:", {k: round(S.median(v), 3) for k, v in cpu.items()})
for f in sorted(glob.glob(f"{O}/{pre}_engine_*.json")):
    print("engine", f.split('/')[-1], json.load(open(f))["engine"])
