import kernels; kernels.init()
import sys, json, numpy as np
sys.path.insert(0, '.')
from tests.model import test_moe_golden as T
from tools.refs import moe_checkpoint as mc
from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
rec = T.record("glm4moe-tiny")
b = mc.build_once("glm4moe-tiny", ("F32", "Q8_0", "Q4_K_M"), hf=False)
op = open_model(str(b.gguf["Q4_K_M"]), progress=False)
eng = op.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
lc = {c["name"]: c for c in rec["llama_cpp"]["Q4_K_M"]["cases"]}
print("keys llama case:", list(lc["unicode"].keys()))
for case in rec["references"]["Q4_K_M q8_0"]["cases"]:
    eng.apply(BeginStep(0, tuple(range(8))))
    logits = eng.apply(RoundStep((Chunk(0, 0, tuple(case["prompt_ids"]), True),)))[0]
    eng.apply(EndStep(0))
    ref = case["top5"][0]
    got, want = logits[ref["ids"]], np.array(ref["logits"])
    # logprob comparison with llama.cpp if present
    lse = float(np.log(np.sum(np.exp(logits.astype(np.float64) - logits.max()))) + logits.max())
    print(f"{case['name']:11s} step0 max|dlogit| {np.abs(got-want).max():.2e} rel {np.max(np.abs(got-want)/np.abs(want)):.2e}")
print("--- logprobs vs llama.cpp Q4_K_M run, step 0")
for case in rec["references"]["Q4_K_M q8_0"]["cases"]:
    eng.apply(BeginStep(0, tuple(range(8))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(case["prompt_ids"]), True),)))[0].astype(np.float64)
    eng.apply(EndStep(0))
    lp = lg - (np.log(np.sum(np.exp(lg - lg.max()))) + lg.max())
    t = lc[case["name"]]["top5"][0]
    k = [k for k in t if k != "ids"][0]
    ours = lp[t["ids"]]; theirs = np.array(t[k])
    rl = np.array(case["top5"][0]["logits"]); rlse = case["logsumexp"][0] if "logsumexp" in case else None
    refs = rl - rlse if rlse is not None else None
    print(f"{case['name']:11s} ({k}) ours-llama {np.abs(ours-theirs).max():.2e}" + (f" ref-llama {np.abs(refs-theirs).max():.2e}" if refs is not None else ""))
