"""Decode tokens/s of the default model on the CPU at batch 1 and 8, against the memory floor,
and llama.cpp's llama-bench on the same file in the same run, with the ratios.

The floor of a decode step is reading every weight once: weight bytes (as the engine holds
them: blocks where kept as stored) / the copy bandwidth measured in the same run (a large
numpy copy, bytes read + written). With --llama-bench PATH (or $LLAMA_BENCH, or
/tmp/lcpp/llama.cpp/build/bin/llama-bench when present) the two engines alternate for
--repeat rounds (ours, llama.cpp, ours, ...: on a shared machine both see the same noise),
each round: our decode at each batch, our prefill of --pp tokens (one chunk, TTFT), llama-bench
tg{steps} and pp{pp} at -t {threads}. Prints every round, the medians, the ratios and one
JSON line. Usage: python3 bench/cpu_decode.py [--model M] [--steps N] [--batches 1,8]
[--pp 512] [--repeat 3] [--llama-bench PATH] [--threads 2]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402


def copy_bandwidth(nbytes=1 << 30, reps=5) -> float:
    a = np.ones(nbytes // 4, np.float32)
    b = np.empty_like(a)
    best = 1e9
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - t)
    return 2 * a.nbytes / best


def weight_bytes(engine) -> int:
    w = engine.weights
    n = w.lm_head.nbytes + w.norm.nbytes          # the embedding's rows read are few
    for L in w.layers:
        for a in (L.attn_norm, L.wqkv, L.bqkv, L.q_norm, L.k_norm, L.wo, L.mlp_norm, L.wgu, L.wdown):
            n += 0 if a is None else a.nbytes
    return n


def run_batch(engine, batch, prompt_len, steps, page_rows=16):
    per = -(-(prompt_len + steps + 1) // page_rows)
    engine.apply(PoolStep(True, per * batch, page_rows, (engine.page_bytes(page_rows),), batch,
                          prompt_len + steps + 1))
    rng = np.random.default_rng(0)
    for s in range(batch):
        engine.apply(BeginStep(s, tuple(range(s * per, (s + 1) * per))))
        prompt = tuple(int(t) for t in rng.integers(100, 20000, prompt_len))
        engine.apply(RoundStep((Chunk(s, 0, prompt, True),)))
    toks = [int(t) for t in rng.integers(100, 20000, batch)]
    times = []
    for i in range(steps):
        t = time.perf_counter()
        lg = engine.apply(RoundStep(tuple(Chunk(s, prompt_len + i, (toks[s],), True) for s in range(batch))))
        times.append(time.perf_counter() - t)
        toks = [int(np.argmax(r)) for r in lg]
    times = sorted(times[2:])
    med = times[len(times) // 2]
    return med, batch / med


def prefill(engine, n, page_rows=16) -> float:
    """Seconds to prefill n random tokens as one chunk and get the first logits (TTFT)."""
    pages = -(-(n + 1) // page_rows)
    engine.apply(PoolStep(True, pages, page_rows, (engine.page_bytes(page_rows),), 1, n + 1))
    engine.apply(BeginStep(0, tuple(range(pages))))
    prompt = tuple(int(t) for t in np.random.default_rng(1).integers(100, 20000, n))
    t = time.perf_counter()
    engine.apply(RoundStep((Chunk(0, 0, prompt, True),)))
    return time.perf_counter() - t


def default_llama_bench() -> str | None:
    p = os.environ.get("LLAMA_BENCH") or "/tmp/lcpp/llama.cpp/build/bin/llama-bench"
    return p if os.path.isfile(p) else None


def llama_bench(exe, model_path, threads, steps, pp) -> dict:
    """llama-bench tg{steps} and pp{pp} (one repetition each): {"tg": tok/s, "pp": tok/s}."""
    cmd = [exe, "-m", model_path, "-t", str(threads), "-n", str(steps), "-p", str(pp), "-r", "1",
           "-o", "json"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr[-400:]}")
    got = {}
    for r in json.loads(out.stdout):
        key = "tg" if r.get("n_gen") else "pp"
        got[key] = float(r["avg_ts"])
    return got


def median(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=None)
    ap.add_argument("--steps", type=int, default=24)
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--pp", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--llama-bench", default=default_llama_bench())
    a = ap.parse_args()
    try:                                   # our kernels' threads = llama-bench's -t
        import numba
        numba.set_num_threads(min(a.threads, numba.config.NUMBA_NUM_THREADS))
    except ImportError:
        pass
    t0 = time.perf_counter()
    opened = open_model(a.model, progress=False)
    load_s = time.perf_counter() - t0
    bw = copy_bandwidth()
    wb = weight_bytes(opened.engine)
    floor = wb / bw
    batches = [int(x) for x in a.batches.split(",")]
    rounds = []
    for rep in range(a.repeat):
        r = {"round": rep}
        for b in batches:
            med, tps = run_batch(opened.engine, b, a.prompt_len, a.steps)
            r[f"b{b}_tok_s"] = tps
            r[f"b{b}_step_ms"] = med * 1e3
        if a.pp:
            r["pp_s"] = prefill(opened.engine, a.pp)
            r["pp_tok_s"] = a.pp / r["pp_s"]
        if a.llama_bench:
            lb = llama_bench(a.llama_bench, opened.source, a.threads, a.steps, a.pp)
            r["llama_tg_tok_s"], r["llama_pp_tok_s"] = lb.get("tg"), lb.get("pp")
        print("round", json.dumps(r), flush=True)
        rounds.append(r)
    rows = []
    for b in batches:
        med = median([r[f"b{b}_step_ms"] for r in rounds]) / 1e3
        rows.append({"batch": b, "step_ms": med * 1e3, "tokens_per_s": b / med,
                     "floor_ms": floor * 1e3, "step_over_floor": med / floor,
                     "tok_s_rounds": [round(r[f"b{b}_tok_s"], 2) for r in rounds]})
    head = {"model": opened.name, "weights_bytes": wb, "copy_bandwidth_GBps": bw / 1e9,
            "load_s": load_s, "threads": a.threads,
            "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
            "blas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                     text=True).stdout.strip()}
    if a.pp:
        head["pp_tok_s"] = median([r["pp_tok_s"] for r in rounds])
    if a.llama_bench:
        head["llama_tg_tok_s"] = median([r["llama_tg_tok_s"] for r in rounds])
        head["llama_pp_tok_s"] = median([r["llama_pp_tok_s"] for r in rounds]) if a.pp else None
        # ratios round by round (the two engines side by side), then their median
        head["ratio_b1_over_llama_tg"] = median([r["b1_tok_s"] / r["llama_tg_tok_s"] for r in rounds]) \
            if 1 in batches else None
        head["ratio_pp_over_llama_pp"] = median([r["pp_tok_s"] / r["llama_pp_tok_s"] for r in rounds]) \
            if a.pp else None
    if 1 in batches and 8 in batches:
        head["ratio_b8_over_b1"] = median([r["b8_tok_s"] / r["b1_tok_s"] for r in rounds])
    print(f"model {head['model']}: {wb / 1e6:.0f} MB of weights read per decode step; "
          f"copy bandwidth {bw / 1e9:.1f} GB/s -> floor {floor * 1e3:.1f} ms a step")
    print(f"{'batch':>5} {'ms/step':>9} {'tokens/s':>9} {'x floor':>8}")
    for r in rows:
        print(f"{r['batch']:>5} {r['step_ms']:>9.1f} {r['tokens_per_s']:>9.1f} {r['step_over_floor']:>8.2f}")
    if a.pp:
        print(f"prefill {a.pp}: {head['pp_tok_s']:.1f} tok/s (TTFT {a.pp / head['pp_tok_s']:.2f} s)")
    if a.llama_bench:
        print(f"llama.cpp -t {a.threads}: tg{a.steps} {head['llama_tg_tok_s']:.1f} tok/s"
              + (f", pp{a.pp} {head['llama_pp_tok_s']:.1f} tok/s" if a.pp else ""))
        print(f"ratios (median of rounds): our b1 / llama tg = {head['ratio_b1_over_llama_tg']:.2f}"
              + (f"; our pp / llama pp = {head['ratio_pp_over_llama_pp']:.2f}" if a.pp else ""))
    if "ratio_b8_over_b1" in head:
        print(f"our b8 / our b1 tokens/s = {head['ratio_b8_over_b1']:.2f}")
    print(json.dumps({**head, "rounds": rounds, "rows": rows}))


if __name__ == "__main__":
    main()
