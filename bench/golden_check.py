"""The golden file's rule on any device and model file: exact prompt ids, greedy ids equal to
the reference's for each case's exact_prefix (tests/data/smollm2-135m-instruct-q4_1.json; its
`rule` says why a prefix). tests/model/test_golden.py holds the CPU to it in the suite; this
runs the same check where the suite does not (the GPU path, a requantized file).

  python3 bench/golden_check.py [--device cuda] [--model FILE.gguf]

Prints one JSON line per case and a last line {"passed": k, "of": n}; exit 1 unless all pass.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from server.engine.build import open_model  # noqa: E402
from server.generate import generate  # noqa: E402
from server.requests import SamplingParams  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests/data/smollm2-135m-instruct-q4_1.json")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--model", default=None, help="a .gguf file (default: the installed default)")
    ap.add_argument("--golden", default=GOLDEN)
    a = ap.parse_args(argv)
    golden = json.load(open(a.golden))
    opened = open_model(a.model, device=a.device, progress=False)
    passed = 0
    for case in golden["cases"]:
        ids = opened.tokenizer.encode(case["text"], add_special_tokens=False)
        n = case["exact_prefix"]
        out = generate(opened, ids, SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
        ok = ids == case["prompt_ids"] and list(out[:n]) == case["greedy_ids"][:n]
        first = next((i for i, (x, y) in enumerate(zip(out, case["greedy_ids"][:n])) if x != y), None)
        passed += ok
        print(json.dumps({"case": case["name"], "ok": ok, "exact_prefix": n,
                          "prompt_ids_equal": ids == case["prompt_ids"], "first_differing_step": first}))
    print(json.dumps({"device": a.device, "model": opened.name, "passed": passed,
                      "of": len(golden["cases"])}))
    return 0 if passed == len(golden["cases"]) else 1


if __name__ == "__main__":
    sys.exit(main())
