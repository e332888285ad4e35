"""What the Q8_0 head against q8_0 x (HEAD_Q8_0_X8) moves in the golden records of the families
that opt in: each record's Q8_0 file served twice, the head on float32 x (ops.q80_head None,
main's arithmetic) and on q8_0 x (the switch), every case's greedy ids against the reference
(the first step that differs, against the record's exact_prefix / near_tie_step) and the
tests' measures (test_moe_golden: step 0's top-5 logits, max relative error; test_qwen3next_gguf:
top-5 logprobs over the exact prefix, max abs error), nothing asserted.

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-q8x/golden_moves.py
"""
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT))


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return None


def moe():
    from server.engine.build import open_model
    from server.generate import generate
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    from server.requests import SamplingParams
    from tools.refs import moe_checkpoint as mc
    for name in ["qwen3moe-tiny", "glm4moe-tiny", "deepseek3-tiny", "glm47flash-tiny", "deepseek2lite-tiny"]:
        rec = json.loads((ROOT / "tests/data/moe" / f"{name}.json").read_text())
        b = mc.build_once(name)
        opened = open_model(str(b.gguf["Q8_0"]), progress=False)
        ops = opened.engine.model.ops
        head = ops.q80_head
        print(f"== {name} (test_moe_golden, Q8_0 file; head {opened.engine.model.w.lm_head.kind} "
              f"{opened.engine.model.w.lm_head.rows}x{opened.engine.model.w.lm_head.cols}, switch "
              f"{'on' if head is not None else 'OFF'})")
        logits = {}
        for mode in ("float32 x", "q8_0 x"):
            ops.q80_head = head if mode == "q8_0 x" else None
            for case in rec["references"]["Q8_0"]["cases"]:
                n = case["exact_prefix"]
                out = generate(opened, case["prompt_ids"], SamplingParams(max_tokens=len(case["greedy_ids"]),
                                                                          temperature=0.0, ignore_eos=True))
                fd = first_diff(out, case["greedy_ids"])
                eng = opened.engine
                eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
                eng.apply(BeginStep(0, tuple(range(8))))
                lg = np.array(eng.apply(RoundStep((Chunk(0, 0, tuple(case["prompt_ids"]), True),)))[0])
                eng.apply(EndStep(0))
                logits[(mode, case["name"])] = lg
                ref = case["top5"][0]
                got, want = lg[ref["ids"]], np.array(ref["logits"], np.float64)
                rel = float(np.max(np.abs(got - want) / np.abs(want)))
                ok = out[:n] == case["greedy_ids"][:n]
                at = ""
                if fd is not None and fd < len(case["top5"]) and case["top5"][fd] is not None:
                    t = case["top5"][fd]
                    v = t.get("logits") or t.get("logprobs")
                    at = f" (the reference's top-1 - top-2 there: {v[0] - v[1]:.4f}; ours {out[fd]} is its #{t['ids'].index(out[fd]) + 1 if out[fd] in t['ids'] else '>5'})"
                print(f"  {mode:9s} {case['name']:12s} exact_prefix {n:2d} near_tie {case['near_tie_step']} "
                      f"first differing step {fd}{at}; ids through the prefix {'equal' if ok else 'DIFFER'}; "
                      f"top-5 step 0 max rel err {rel:.2e} ({'<' if rel < 1e-3 else '>='} 1e-3); "
                      f"min top-1 margin {case['min_top1_margin']:.4f}")
        for case in rec["references"]["Q8_0"]["cases"]:
            a, c = logits[("float32 x", case["name"])], logits[("q8_0 x", case["name"])]
            print(f"  {case['name']:12s} step 0 logits q8_0 x - float32 x: max |d| {np.abs(a - c).max():.2e}, "
                  f"rms {np.sqrt(np.mean((a - c) ** 2)):.2e}, logit std {a.std():.3f}")
        ops.q80_head = head


def next3():
    from server.engine.engine import Engine
    from server.engine.weights import load
    from tools.refs import next_gguf as ng
    sys.path.insert(0, str(ROOT / "tests" / "model"))
    from tests.model.test_qwen3next_gguf import _walk
    for arch, nm in (("qwen3next", "qwen3next-tiny"), ("qwen35moe", "qwen35moe-tiny")):
        rec = json.loads((ROOT / "tests/data/qwen3next" / f"{nm}-gguf.json").read_text())
        path, _ = ng.build_once("Q8_0", arch)
        ld = load(str(path), progress=False)
        eng = Engine(ld.spec, ld.tensors.__getitem__)
        ops = eng.model.ops
        head = ops.q80_head
        print(f"== {nm} (test_qwen3next_gguf, Q8_0 file; switch {'on' if head is not None else 'OFF'})")
        own = {c["name"]: c for c in rec["llama_cpp"]["Q8_0"]["cases"]}
        for mode in ("float32 x", "q8_0 x"):
            ops.q80_head = head if mode == "q8_0 x" else None
            for case in rec["llama_cpp"]["Q8_0 weights as F32"]["cases"]:
                n = case["exact_prefix"]
                ids, rows = _walk(eng, case["prompt_ids"], len(case["greedy_ids"]))
                fd = first_diff(ids, case["greedy_ids"])
                worst = worst_own = 0.0
                for step, ref in enumerate(case["top5"][:n]):
                    if ref is None:
                        continue
                    worst = max(worst, float(np.max(np.abs(rows[step][ref["ids"]] - np.array(ref["logprobs"])))))
                o = own.get(case["name"])
                if o is not None:
                    m = min(n, o["exact_prefix"], first_diff(o["greedy_ids"], case["greedy_ids"]) or n)
                    for step, ref in enumerate(o["top5"][:m]):
                        if ref is not None:
                            worst_own = max(worst_own, float(np.max(np.abs(rows[step][ref["ids"]] - np.array(ref["logprobs"])))))
                print(f"  {mode:9s} {case['name']:12s} exact_prefix {n:2d} near_tie {case['near_tie_step']} "
                      f"first differing step {fd}; ids through the prefix {'equal' if ids[:n] == case['greedy_ids'][:n] else 'DIFFER'}; "
                      f"top-5 logprobs max abs err {worst:.2e} ({'<' if worst < 2e-4 else '>='} 2e-4) "
                      f"[vs llama.cpp's own Q8_0 run (q8_0 x everywhere): {worst_own:.2e}]")
        ops.q80_head = head


if __name__ == "__main__":
    import kernels
    kernels.init()
    which = sys.argv[1:] or ["moe", "next"]
    if "moe" in which:
        moe()
    if "next" in which:
        next3()
