"""Decode step time of the one-call forward (kernels/forward_cpu.py) vs the op-by-op path,
in one process, alternating round by round (both see the same machine), at each --threads,
with llama-bench's tg at the same -t between rounds when --llama-bench is given.

  python3 bench/cpu_fused_ab.py [--threads 1,2] [--rounds 3] [--steps 40] [--batch 1]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.cpu_decode import default_llama_bench, llama_bench, median  # noqa: E402
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep  # noqa: E402


def steps(eng, batch, prompt_len, n, seed):
    page_rows = 16
    per = -(-(prompt_len + n + 1) // page_rows)
    eng.apply(PoolStep(True, per * batch, page_rows, (eng.page_bytes(page_rows),), batch, prompt_len + n + 1))
    rng = np.random.default_rng(seed)
    for s in range(batch):
        eng.apply(BeginStep(s, tuple(range(s * per, (s + 1) * per))))
        eng.apply(RoundStep((Chunk(s, 0, tuple(int(t) for t in rng.integers(100, 20000, prompt_len)), True),)))
    toks = [int(t) for t in rng.integers(100, 20000, batch)]
    ts, cs = [], []
    for i in range(n):
        t, c = time.perf_counter(), time.process_time()
        lg = eng.apply(RoundStep(tuple(Chunk(s, prompt_len + i, (toks[s],), True) for s in range(batch))))
        ts.append(time.perf_counter() - t)
        cs.append(time.process_time() - c)
        toks = [int(np.argmax(r)) for r in lg]
    for s in range(batch):
        eng.apply(EndStep(s))
    return median(ts[3:]) * 1e3, median(cs[3:]) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--llama-bench", default=None)
    a = ap.parse_args()
    import numba
    opened = open_model(None, progress=False)
    eng = opened.engine
    fused = eng.model.fused
    assert fused is not None
    rows = []
    for t in [int(x) for x in a.threads.split(",")]:
        numba.set_num_threads(t)
        for rep in range(a.rounds):
            r = {"threads": t, "round": rep}
            for name, f in (("fused", fused), ("ops", None), ):
                eng.model.fused = f
                r[f"{name}_ms"], r[f"{name}_cpu_ms"] = steps(eng, a.batch, a.prompt_len, a.steps, rep)
            eng.model.fused = fused
            if a.llama_bench:
                r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
                llama_bench(a.llama_bench, opened.source, t, 16, 0)
                r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
                lb = llama_bench(a.llama_bench, opened.source, t, 80, 0)
                r2 = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu = lambda x, y: y.ru_utime + y.ru_stime - x.ru_utime - x.ru_stime  # noqa: E731
                r["llama_tg_tok_s"] = lb["tg"]
                r["llama_ms"] = 1e3 / lb["tg"]
                # CPU seconds a token: (tg80's run - tg16's run) / 64 (load and warm-up cancel)
                r["llama_cpu_ms"] = (cpu(r1, r2) - cpu(r0, r1)) / 64 * 1e3
            r["loadavg"] = os.getloadavg()[0]
            print("round", json.dumps(r), flush=True)
            rows.append(r)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    for t in sorted({r["threads"] for r in rows}):
        rs = [r for r in rows if r["threads"] == t]
        f, o = median([r["fused_ms"] for r in rs]), median([r["ops_ms"] for r in rs])
        line = (f"-t {t} batch {a.batch}: step fused {f:.2f} ms, op-by-op {o:.2f} ms "
                f"(fused/ops {median([r['fused_ms'] / r['ops_ms'] for r in rs]):.2f})")
        if a.llama_bench:
            line += (f"; llama tg {median([r['llama_ms'] for r in rs]):.2f} ms, ours fused / llama "
                     f"tok/s {median([r['llama_ms'] / r['fused_ms'] for r in rs]):.2f}; CPU a token: ours "
                     f"{median([r['fused_cpu_ms'] for r in rs]):.2f} ms, llama "
                     f"{median([r['llama_cpu_ms'] for r in rs]):.2f} ms (llama/ours "
                     f"{median([r['llama_cpu_ms'] / r['fused_cpu_ms'] for r in rs]):.2f})")
        print(line)
    print(json.dumps({"commit": commit, "batch": a.batch, "rows": rows}))


if __name__ == "__main__":
    main()
