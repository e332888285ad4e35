"""The default model on the CPU through the server, beside llama.cpp's llama-bench on the same
file, in one run, with the ratios (issue 23's targets).

Starts `foldserve serve` (this checkout, --threads numba threads) on --port, waits for
/health (the time is printed: load + start), then --rounds rounds, each:
  ours  b1 decode    `foldserve bench` at concurrency 1 (64-token prompts, 64 out): 1000 / TPOT
        b8 decode    the same at concurrency 8: 8 * 1000 / TPOT (tokens/s of the batch)
        pp512 TTFT   concurrency 1, 512-token prompts, 1 out: 512 / TTFT
        README curl  the README's chat request (40 tokens), streamed: TTFT, decode, e2e
  llama.cpp  llama-bench -t THREADS tg64 and pp512 (one repetition each)
The engines alternate round by round, so on a shared machine both see the same noise; the
ratios are taken round by round, then their median. Prints every round and one JSON line.

  python3 bench/cpu_serve.py [--threads 2] [--rounds 3] [--port 8123] [--llama-bench PATH]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.cpu_decode import default_llama_bench, llama_bench, median  # noqa: E402
from server.bench import add_arguments, bench  # noqa: E402

CURL = {"messages": [{"role": "user", "content": "What does a GPU do?"}], "max_tokens": 40}


def ours(url, concurrency, requests, input_len, output_len, seed) -> dict:
    """`foldserve bench`'s summary; every call its own seed, so no prompt is in the prompt
    cache from an earlier call (a cached prefix would shorten the TTFT measured)."""
    p = argparse.ArgumentParser()
    add_arguments(p)
    a = p.parse_args(["--url", url, "--concurrency", str(concurrency), "--requests", str(requests),
                      "--input-len", str(input_len), "--output-len", str(output_len),
                      "--seed", str(seed), "--endpoint", "/v1/completions"])
    s = asyncio.run(bench(a))
    if s["failed"]:
        raise RuntimeError(f"bench: {s['failed']} failed: {s['errors']}")
    return s


def curl(url) -> dict:
    """The README's request, streamed: seconds to the first text, decode after it, end to end."""
    t0 = time.perf_counter()
    first = None
    n = 0
    with httpx.stream("POST", f"{url}/v1/chat/completions", json={**CURL, "stream": True},
                      timeout=600) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            delta = json.loads(line[6:])["choices"][0].get("delta", {})
            if delta.get("content"):
                n += 1
                if first is None:
                    first = time.perf_counter()
    end = time.perf_counter()
    return {"ttft_s": (first or end) - t0, "decode_s": end - (first or end), "e2e_s": end - t0,
            "chunks": n}


def start_server(port, threads):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port)]
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url, time.perf_counter() - t0
        except httpx.HTTPError:
            pass
        if time.perf_counter() - t0 > 600:
            raise RuntimeError("server not healthy in 600 s")
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8123)
    ap.add_argument("--llama-bench", default=default_llama_bench())
    ap.add_argument("--model-file", default=None, help="the GGUF llama-bench reads (default: the "
                    "default model's file, as the server opens it)")
    a = ap.parse_args()
    from server.engine.locate import resolve
    gguf = a.model_file or str(resolve(None))
    proc, url, ready_s = start_server(a.port, a.threads)
    print(f"server healthy in {ready_s:.2f} s (start + load, NUMBA_NUM_THREADS={a.threads})", flush=True)
    rounds = []
    try:
        ours(url, 1, 1, 16, 8, 99)                          # warm: the JIT cache read, pools made
        for rep in range(a.rounds):
            r = {"round": rep}
            s = ours(url, 1, 3, 64, 64, 100 + 10 * rep)
            r["b1_tpot_ms"] = s["tpot_ms"]["median"]
            r["b1_tok_s"] = 1000 / r["b1_tpot_ms"]
            s = ours(url, 8, 8, 64, 64, 101 + 10 * rep)
            r["b8_tpot_ms"] = s["tpot_ms"]["median"]
            r["b8_tok_s"] = 8 * 1000 / r["b8_tpot_ms"]
            s = ours(url, 1, 2, 512, 1, 102 + 10 * rep)
            r["pp512_ttft_s"] = s["ttft_ms"]["median"] / 1000
            r["pp512_tok_s"] = 512 / r["pp512_ttft_s"]
            r["curl"] = curl(url)
            if a.llama_bench:
                lb = llama_bench(a.llama_bench, gguf, a.threads, 64, 512)
                r["llama_tg_tok_s"], r["llama_pp_tok_s"] = lb.get("tg"), lb.get("pp")
                r["ratio_b1"] = r["b1_tok_s"] / r["llama_tg_tok_s"]
                r["ratio_pp512"] = r["pp512_tok_s"] / r["llama_pp_tok_s"]
            r["ratio_b8_over_b1"] = r["b8_tok_s"] / r["b1_tok_s"]
            print("round", json.dumps(r), flush=True)
            rounds.append(r)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    out = {"threads": a.threads, "server_ready_s": ready_s, "loadavg": os.getloadavg(),
           "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                                    capture_output=True, text=True).stdout.strip()}
    for k in ("b1_tok_s", "b8_tok_s", "pp512_tok_s", "llama_tg_tok_s", "llama_pp_tok_s", "ratio_b1",
              "ratio_pp512", "ratio_b8_over_b1"):
        if k in rounds[0]:
            out[k] = median([r[k] for r in rounds])
    out["curl_decode_s"] = median([r["curl"]["decode_s"] for r in rounds])
    out["curl_e2e_s"] = median([r["curl"]["e2e_s"] for r in rounds])
    print(f"ours   (-t {a.threads}): b1 {out['b1_tok_s']:.1f} tok/s, b8 {out['b8_tok_s']:.1f} tok/s, "
          f"pp512 {out['pp512_tok_s']:.1f} tok/s; README curl decode {out['curl_decode_s']:.2f} s, "
          f"e2e {out['curl_e2e_s']:.2f} s")
    if "ratio_b1" in out:
        print(f"llama.cpp (-t {a.threads}): tg64 {out['llama_tg_tok_s']:.1f} tok/s, pp512 "
              f"{out['llama_pp_tok_s']:.1f} tok/s")
        print(f"ratios (median of rounds): b1 / llama tg = {out['ratio_b1']:.2f} (target >= 1); "
              f"pp512 / llama pp = {out['ratio_pp512']:.2f} (target >= 1)")
    print(f"b8 / b1 = {out['ratio_b8_over_b1']:.2f} (target >= 3); curl decode "
          f"{out['curl_decode_s']:.2f} s (target < 1); server ready {ready_s:.2f} s")
    print(json.dumps({**out, "rounds": rounds}))


if __name__ == "__main__":
    main()
