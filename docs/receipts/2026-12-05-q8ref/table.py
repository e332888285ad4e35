"""The per-case numbers of the "Q8_0 q8_0" blocks: python3 docs/receipts/2026-12-05-q8ref/table.py"""
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
recs = [(f"moe/{n}.json", n, k) for n in ("qwen3moe-tiny", "glm4moe-tiny", "deepseek3-tiny", "glm47flash-tiny",
                                          "deepseek2lite-tiny") for k in ("Q8_0 q8_0",)]
recs += [("moe/glm4moe-tiny.json", "glm4moe-tiny Q4_K_M", "Q4_K_M q8_0")]
recs += [(f"qwen3next/{n}-gguf.json", n, "Q8_0 q8_0") for n in ("qwen3next-tiny", "qwen35moe-tiny")]
print("| record | prompt | exact_prefix (min top-1 margin) | llama.cpp Q8_0: same ids through, max abs dlogprob | float reference: same ids through, step-0 max abs diff |")
print("|---|---|---|---|---|")
for path, label, key in recs:
    b = json.loads((ROOT / "tests/data" / path).read_text())["references"][key]
    for c in b["cases"]:
        ag, fa = b["llama_cpp_Q8_0_agreement"][c["name"]], b["float_reference_agreement"][c["name"]]
        dl = ag["max_abs_logprob_diff"]
        f0 = fa.get("step0_top5_max_abs_logit_diff") or fa.get("step0_top5_max_abs_logprob_diff")
        print(f"| {label} | {c['name']} | {c['exact_prefix']} ({c['min_top1_margin']:.4f}) | "
              f"{ag['same_ids_through']}/24, {'-' if dl is None else f'{dl:.1e}'} | {fa['same_ids_through']}/24, {f0:.3f} |")
