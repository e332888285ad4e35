"""Where a decode step's time goes on the CPU (the default model over its GGUF blocks).

Loads the model in-process, prefills --prompt-len tokens per stream, then times --steps decode
steps at --batch, with every kernel call wrapped by a timer: each matmul by its shape (qkv, o,
gate/up, down, head), the norms, SwiGLU, attention, the embedding; "rest" is the step's time
outside them (Python in the engine and model). Counts numba parallel regions a step (the
parallel kernels' calls). Prints ms per stage per step (median step's breakdown averaged over
the steps), bytes each matmul reads, and the copy bandwidth measured in the same run.

  python3 bench/cpu_step_profile.py [--threads 2] [--steps 40] [--batch 1] [--repeat 3]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.cpu_decode import copy_bandwidth  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

T = collections.defaultdict(float)
N = collections.Counter()
B = collections.Counter()
PAR = [0]


def wrap(mod, name, key, parallel=False, nbytes=None):
    fn = getattr(mod, name)

    def timed(*a, **k):
        t = time.perf_counter()
        r = fn(*a, **k)
        kk = key(*a) if callable(key) else key
        T[kk] += time.perf_counter() - t
        N[kk] += 1
        if nbytes is not None:
            B[kk] += nbytes(*a)
        if parallel if not callable(parallel) else parallel(*a):
            PAR[0] += 1
        return r
    setattr(mod, name, timed)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    import kernels
    kernels.init()                 # before the numba kernels (kernels/__init__.py)
    import numba
    numba.set_num_threads(a.threads)
    opened = open_model(None, progress=False)
    eng = opened.engine
    fused = getattr(eng.model, "fused", None)
    eng.model.fused = None        # the op-by-op path: each kernel call timed (the one-call
    # forward runs the same kernels with no Python between; its step time is printed last)
    from kernels import blocks_vec, rmsnorm_cpu, attention_cpu, blocks_cpu, qmatmul
    names = {}
    L0 = eng.weights.layers[0]
    for nm, w in (("qkv", L0.wqkv), ("o", L0.wo), ("gate_up", L0.wgu), ("down", L0.wdown),
                  ("head", eng.weights.lm_head)):
        names[(w.kind, w.data.shape)] = f"mm {nm} {w.kind} {w.rows}x{w.cols}"
    mmkey = lambda x, kind, data, out=None: names.get((kind, data.shape), f"mm {kind} {data.shape}")  # noqa: E731
    sc = getattr(blocks_vec, "_scales_of", None)         # the float32 scale copy (before c23)
    wrap(blocks_vec, "matmul", mmkey, parallel=True,
         nbytes=lambda x, kind, data, out=None: data.nbytes + (sc(kind, data).nbytes if sc else 0))
    wrap(rmsnorm_cpu, "rms_norm", "norm")
    wrap(rmsnorm_cpu, "add_rms_norm", "add+norm")
    wrap(rmsnorm_cpu, "swiglu", "swiglu")
    wrap(attention_cpu, "round_attend", "attention")
    wrap(qmatmul, "rows", "embed")
    bw = copy_bandwidth(1 << 28)
    page_rows = 16
    per = -(-(a.prompt_len + a.steps + 1) // page_rows)
    results = []
    for rep in range(a.repeat):
        eng.apply(PoolStep(True, per * a.batch, page_rows, (eng.page_bytes(page_rows),), a.batch,
                           a.prompt_len + a.steps + 1))
        rng = np.random.default_rng(rep)
        for s in range(a.batch):
            eng.apply(BeginStep(s, tuple(range(s * per, (s + 1) * per))))
            eng.apply(RoundStep((Chunk(s, 0, tuple(int(t) for t in rng.integers(100, 20000, a.prompt_len)), True),)))
        toks = [int(t) for t in rng.integers(100, 20000, a.batch)]
        steps = []
        for i in range(a.steps):
            T.clear(); N.clear(); B.clear(); PAR[0] = 0
            t = time.perf_counter()
            lg = eng.apply(RoundStep(tuple(Chunk(s, a.prompt_len + i, (toks[s],), True) for s in range(a.batch))))
            total = time.perf_counter() - t
            toks = [int(np.argmax(r)) for r in lg]
            steps.append((total, dict(T), dict(N), dict(B), PAR[0]))
        from server.ranks.steps import EndStep
        for s in range(a.batch):
            eng.apply(EndStep(s))
        steps = steps[3:]
        tot = sorted(s[0] for s in steps)
        med = tot[len(tot) // 2]
        keys = sorted({k for s in steps for k in s[1]})
        mean = {k: float(np.mean([s[1].get(k, 0.0) for s in steps])) for k in keys}
        row = {"round": rep, "step_ms_median": med * 1e3, "step_ms_min": tot[0] * 1e3,
               "stage_ms_mean": {k: v * 1e3 for k, v in mean.items()},
               "rest_ms_mean": (float(np.mean([s[0] for s in steps])) - sum(mean.values())) * 1e3,
               "calls": steps[-1][2], "bytes": steps[-1][3], "parallel_regions": steps[-1][4],
               "loadavg": os.getloadavg()}
        results.append(row)
        print("round", json.dumps(row), flush=True)
    print(f"threads {a.threads}, batch {a.batch}; copy bandwidth {bw / 1e9:.1f} GB/s (read + write)")
    r = min(results, key=lambda r: r["step_ms_median"])
    print(f"best round: step median {r['step_ms_median']:.2f} ms (min {r['step_ms_min']:.2f}), "
          f"{r['parallel_regions']} parallel regions a step, load {r['loadavg'][0]:.1f}")
    tb = 0
    for k, v in sorted(r["stage_ms_mean"].items(), key=lambda kv: -kv[1]):
        b = r["bytes"].get(k, 0)
        tb += b
        gb = f"{b / 1e6:7.1f} MB {b / (v * 1e-3) / 1e9:5.1f} GB/s" if b else ""
        print(f"  {k:32s} {v:7.3f} ms  {r['calls'].get(k, 0):4d} calls  {gb}")
    print(f"  {'rest (python, outside kernels)':32s} {r['rest_ms_mean']:7.3f} ms")
    print(f"  bytes read by the matmuls a step: {tb / 1e6:.1f} MB")
    fused_ms = None
    if fused is not None:
        eng.model.fused = fused
        from bench.cpu_fused_ab import steps as run_steps
        fused_ms = [run_steps(eng, a.batch, a.prompt_len, a.steps, 9 + i) for i in range(a.repeat)]
        print(f"one-call forward (kernels/forward_cpu.py): step median wall / CPU ms by round: "
              + ", ".join(f"{w:.2f} / {c:.2f}" for w, c in fused_ms))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    print(json.dumps({"commit": commit, "threads": a.threads, "batch": a.batch, "copy_GBps": bw / 1e9,
                      "rounds": results, "fused_wall_cpu_ms": fused_ms}))


if __name__ == "__main__":
    main()
