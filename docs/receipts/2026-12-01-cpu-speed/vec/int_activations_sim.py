"""Would integer activations pass the goldens? numpy emulation of llama.cpp's arithmetic: every
matmul's x quantized per block of 32 to round(x / d), d = amax / QMAX (QMAX 127: Q8, llama.cpp;
32767: int16), times the dequantized weights. Usage (worktree root):
python3 THIS_FILE 127 | 32767  (results: README.md, int16_activations_sim.txt)"""
import os, sys, json, numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../.."))
from kernels import qmatmul, ops
QMAX = np.float32(sys.argv[1] if len(sys.argv) > 1 else 127)
HEAD = "q"
def q8(x):
    M, K = x.shape
    b = x.reshape(M, K // 32, 32).astype(np.float32)
    amax = np.abs(b).max(-1, keepdims=True)
    d = (amax / QMAX).astype(np.float32)
    idn = np.where(d > 0, 1 / np.where(d > 0, d, 1), 0).astype(np.float32)
    q = np.round(b * idn).astype(np.float32)     # roundf: half away from zero; np.round is half even (ties rare)
    return (q * d).reshape(M, K)
deq = {}
def cpu(x, w, bias=None):
    if w.rows == 49152 and HEAD == "float":
        xx = x
    else:
        xx = q8(x)
    W = deq.get(id(w))
    if W is None:
        W = deq[id(w)] = w.dequantize().astype(np.float32).T.copy()
    y = (xx.astype(np.float32) @ W)
    if bias is not None: y += bias
    return y.astype(np.float32)
qmatmul.cpu = cpu
from server.engine.build import open_model
from server.generate import generate
from server.requests import SamplingParams
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep
m = open_model(None, progress=False)
g = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../../tests/data/smollm2-135m-instruct-q4_1.json")))
eng = m.engine
eng.apply(PoolStep(True, 8, 16, (eng.page_bytes(16),), 1, 128))
for c in g["cases"]:
    eng.apply(BeginStep(0, tuple(range(8))))
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(c["prompt_ids"]), True),)))[0]
    ref = c["top5"][0]
    rel = np.max(np.abs(lg[ref["ids"]] - np.array(ref["logits"])) / np.abs(ref["logits"]))
    print(c["name"], "first-step max rel %.2e" % rel, list(np.argsort(-lg, kind="stable")[:5]) == ref["ids"], flush=True)
for c in g["cases"]:
    n = c["exact_prefix"]
    out = generate(m, c["prompt_ids"], SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    k = next((i for i in range(n) if out[i] != c["greedy_ids"][i]), n)
    print(c["name"], "greedy match", k, "of", n, flush=True)
