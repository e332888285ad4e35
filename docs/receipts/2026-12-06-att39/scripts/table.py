"""The rounds table of the receipt from raw/*.json (bench.moe_cpu --out)."""
import json, pathlib, sys
raw = pathlib.Path(sys.argv[1])
print("| file | round (UTC, load) | llama.cpp (b) tg / pp512 | att39 tg / pp512 / b8 | main tg / pp512 / b8 | att39 / main pp512 | cores: llama / att39 / main (others) |")
print("|---|---|---|---|---|---|---|")
for p in sorted(raw.glob("*.json"), key=lambda p: (p.stem[0] != "q", p.stem)):
    d = json.load(open(p))[0]
    r = d["rounds"][0]
    L, F, B, c = r["llama_cpp"], r["foldserve"], r["base"], r["cpu"]
    when = open(p.with_suffix(".load")).read().split("\n")[0].split()[3][:5]
    load = r["loadavg"][0].split()[0] + "-" + r["loadavg"][-1].split()[0]
    name = {"qwen3-30b-a3b": "Qwen3-30B-A3B L4 Q4_K_M", "glm-4.5-air": "GLM-4.5-Air L3 Q4_K_M"}[d["shape"]]
    cores = " / ".join(f"{c[k]['ours']:.2f} ({c[k]['others']:.2f})" for k in ("llama_cpp", "foldserve", "base"))
    print(f"| {name} | {p.stem} ({when}, {load}) | {L['tg']:.2f} / {L['pp512']:.2f} | {F['tg']:.2f} / {F['pp512']:.2f} "
          f"(**{F['pp512'] / L['pp512']:.2f}x**) / {F['b8']:.2f} | {B['tg']:.2f} / {B['pp512']:.2f} ({B['pp512'] / L['pp512']:.2f}x) / {B['b8']:.2f} "
          f"| {F['pp512'] / B['pp512']:.3f} | {cores} |")
