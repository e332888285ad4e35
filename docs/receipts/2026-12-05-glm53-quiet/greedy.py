"""llama.cpp's glm5-next graph on the GLM-5.3-shaped Q8_0 file, against foldserve's engine:
greedy continuations of token-id prompts (llama-server /completion, tools/refs/record_moe's
client: F32 KV, temperature 0, top-5 logprobs) and foldserve's greedy ids and log-softmax on the
same ids, one process after the other (never both loaded). Usage (under the bench lock):
    /work/venv-ref/bin/python greedy.py FILE.gguf OUT.json llama; then
    PYTHONPATH=$PWD .venv/bin/python greedy.py FILE.gguf OUT.json ours
"""
import json, sys, time
from pathlib import Path
import numpy as np

import os
N = int(os.environ.get("GREEDY_N", 16))
LENS = [int(v) for v in os.environ.get("GREEDY_LENS", "8,100").split(",")]
f, out = Path(sys.argv[1]), Path(sys.argv[2])
rng = np.random.default_rng(53)
cases = [{"name": f"p{n}", "prompt_ids": [int(t) for t in rng.integers(0, 49152, n)]} for n in LENS]
if sys.argv[3] == "llama":          # the reference venv (record_moe imports torch)
    from tools.refs import record_moe as rm
    rm.N_STEPS = N
    t = time.time()
    ll, cmd = rm.llama_server_cases(Path("/work/peers-build/llama.cpp/build-cpu/bin/llama-server"), f, cases,
                                    out.with_suffix(".llama.log"))
    print(f"llama-server: {time.time() - t:.0f} s", flush=True)
    out.with_suffix(".llama.json").write_text(json.dumps({"command": cmd, "cases": ll}))
    sys.exit(0)
import server  # noqa: F401  (OPENBLAS_NUM_THREADS=1 first)
Q8X = sys.argv[3] == "ours-q8x"
got = json.loads(out.with_suffix(".llama.json").read_text())
if Q8X:
    out = out.with_suffix(".q8x.json")
ll, cmd = got["cases"], got["command"]

import numba
import kernels
kernels.init()
numba.set_num_threads(2)
from server.engine.engine import Engine
from server.engine.weights import load
if Q8X:
    # llama.cpp's activation rounding on the CPU (ggml quantize_row_q8_0: per 32 values
    # d = amax / 127, q = round(x / d), stored d as f16) before every product with a Q8_0
    # weight (the dense products, the head, the experts); F32 weights take x as it is
    from kernels import moe_cpu, qmatmul
    def q8x(x):
        x = np.ascontiguousarray(x, np.float32)
        b = x.reshape(x.shape[0], -1, 32)
        d = np.abs(b).max(axis=2, keepdims=True) / np.float32(127)
        idv = np.where(d > 0, np.float32(1) / np.where(d > 0, d, 1), 0).astype(np.float32)
        q = np.clip(np.sign(b * idv) * np.floor(np.abs(b * idv) + np.float32(0.5)), -127, 127)
        return (q * d.astype(np.float16).astype(np.float32)).reshape(x.shape).astype(np.float32)
    _cpu, _gm = qmatmul.cpu, moe_cpu.grouped_matmul
    n_q = [0, 0]
    def cpu(x, w, bias=None, q8=False):
        if w.kind == "Q8_0":
            n_q[0] += 1
            x = q8x(x)
        return _cpu(x, w, bias, q8)
    def gm(x, experts, *a):
        n_q[1] += 1
        return _gm(q8x(x), experts, *a)
    qmatmul.cpu, moe_cpu.grouped_matmul = cpu, gm
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
ld = load(str(f), progress=False)
eng = Engine(ld.spec, ld.tensors.__getitem__)
eng.apply(PoolStep(True, 16, 16, (eng.page_bytes(16),), 1, 256))
ours = {}
for c in cases:
    eng.apply(BeginStep(0, tuple(range(16))))
    p = c["prompt_ids"]
    lg = eng.apply(RoundStep((Chunk(0, 0, tuple(p), True),)))
    pos, ids, top = len(p), [], []
    lref = next(l for cc, l in zip(cases, ll) if cc["name"] == c["name"])
    for step in range(N):
        x = np.asarray(lg[0], np.float64)
        lp = x - (np.log(np.sum(np.exp(x - x.max()))) + x.max())
        if lref["top5"][step] is not None and lref["greedy_ids"][:step] == ids:
            # the same context as llama.cpp's step: our logprobs of its top-5 ids, by id
            lt = lref["top5"][step]
            c.setdefault("by_id", []).append(max(abs(lp[i] - v) for i, v in zip(lt["ids"], lt["logprobs"])))
        o = np.argsort(-lp, kind="stable")[:5]
        top.append({"ids": [int(i) for i in o], "logprobs": [float(lp[i]) for i in o],
                    "finite": bool(np.isfinite(x).all()), "std": float(x.std())})
        ids.append(int(o[0]))
        lg = eng.apply(RoundStep((Chunk(0, pos, (ids[-1],), True),)))
        pos += 1
    eng.apply(EndStep(0))
    ours[c["name"]] = {"greedy_ids": ids, "top5": top}
if Q8X:
    print(f"activations rounded to Q8_0 before {n_q[0]} dense and {n_q[1]} grouped products", flush=True)
res = {"command": cmd, "cases": cases, "llama_cpp": ll, "foldserve": ours}
out.write_text(json.dumps(res))
for c, l in zip(cases, ll):
    o = ours[c["name"]]
    same = next((i for i, (a, b) in enumerate(zip(o["greedy_ids"], l["greedy_ids"])) if a != b), N)
    print(f"{c['name']}: prompt {len(c['prompt_ids'])} tokens; llama.cpp ids {l['greedy_ids']}")
    print(f"    foldserve ids {o['greedy_ids']}  same for {same}/{N} steps; distinct ids llama.cpp "
          f"{len(set(l['greedy_ids']))}, foldserve {len(set(o['greedy_ids']))}; all logits finite: "
          f"{all(t['finite'] for t in o['top5'])}")
    print(f"    by id (llama.cpp's top-5 ids, our logprobs of them, steps on the same context): max |dlogprob| "
          f"{' '.join(f'{v:.4f}' for v in c.get('by_id', []))}")
    for k in range(min(same + 1, N)):
        lt, ot = l["top5"][k], o["top5"][k]
        if lt is None:
            print(f"    step {k}: llama.cpp listed no probabilities"); continue
        d = max(abs(ot_lp - lv) for ot_lp, lv in zip(ot["logprobs"], lt["logprobs"]))
        print(f"    step {k}: top-5 ids equal {lt['ids'] == ot['ids']}; by rank |dlogprob| <= {d:.4f}; "
              f"llama.cpp top-2 margin {lt['logprobs'][0] - lt['logprobs'][1]:.4f}, foldserve "
              f"{ot['logprobs'][0] - ot['logprobs'][1]:.4f}")
