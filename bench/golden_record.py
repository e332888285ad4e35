"""A golden file of one model file on one device, for bench/golden_check.py --golden: the
shared golden file's prompts, greedy continuations and each step's top1-top2 logit margin,
exact_prefix by the same rule (through the first step whose margin is under 2e-3).

Issue 17 asks that a Q8_0 and a Q4_K_M of the default model (llama-quantize
--allow-requantize from its Q4_1 file) give the same greedy replies on the CPU and the GPU
under the golden rule; the shared golden file holds only the Q4_1 file's. So: record the CPU,
then check the GPU against that record.

  python3 bench/golden_record.py FILE.gguf --device cpu --out cpu.json
  python3 bench/golden_check.py --device cuda --model FILE.gguf --golden cpu.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

NEAR_TIE = 2e-3
GOLDEN = os.path.join(ROOT, "tests/data/smollm2-135m-instruct-q4_1.json")


def exact_prefix(margins: list[float]) -> tuple[int | None, int]:
    """(the first near-tie step or None, how many greedy ids must match): through that step."""
    tie = next((i for i, m in enumerate(margins) if m < NEAR_TIE), None)
    return tie, len(margins) if tie is None else tie + 1


def record(path: str, device: str, steps: int) -> dict:
    import numpy as np
    from server.engine.build import open_model
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep

    opened = open_model(path, device=device, progress=False)
    eng, tok = opened.engine, opened.tokenizer
    eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
    shared = json.load(open(GOLDEN, encoding="utf-8"))
    cases = []
    for case in shared["cases"]:
        ids = tok.encode(case["text"], add_special_tokens=False)
        eng.apply(BeginStep(0, tuple(range(8))))
        chunk, pos, out, margins = tuple(ids), 0, [], []
        for _ in range(steps):
            logits = np.asarray(eng.apply(RoundStep((Chunk(0, pos, chunk, True),)))[0], dtype=np.float64)
            top2 = np.argsort(-logits, kind="stable")[:2]
            out.append(int(top2[0]))
            margins.append(float(logits[top2[0]] - logits[top2[1]]))
            pos += len(chunk)
            chunk = (int(top2[0]),)
        eng.apply(EndStep(0))
        tie, n = exact_prefix(margins)
        cases.append({"name": case["name"], "text": case["text"], "prompt_ids": ids, "greedy_ids": out,
                      "greedy_text": tok.decode(out), "margins": margins, "near_tie_step": tie,
                      "exact_prefix": n})
    return {"model": os.path.basename(path), "reference": f"foldserve on {device} (bench/golden_record.py)",
            "cases": cases, "rule": shared["rule"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rec = record(a.file, a.device, a.steps)
    with open(a.out, "w", encoding="utf-8") as f:
        json.dump(rec, f, indent=1)
    for case in rec["cases"]:
        print(f"{case['name']:>11}: exact_prefix {case['exact_prefix']:2d} {case['greedy_text']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
