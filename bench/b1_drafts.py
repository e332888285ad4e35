"""Batch-1 decode through the server with its default drafting (n-grams on the CPU) and with
`--draft off`, each setting its own fresh server, alternated round by round: the client's TPOT
(cpu_serve.py's b1: `foldserve bench`, 3 streamed requests of 64 prompt tokens, 64 out, greedy)
and, from /metrics, the verify chunks, tokens drafted and accepted in that bench, and from the
scheduler's stats the rounds it took. Replies are compared between the two (greedy: drafted ==
plain).

    FOLDSERVE_MODEL=F PYTHONPATH=$PWD python -m bench.b1_drafts [--rounds 2] [--threads 2]
        [--sets default,off]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import time

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.cpu_serve import ours  # noqa: E402


def start(port, threads, extra):
    env = dict(os.environ, NUMBA_NUM_THREADS=str(threads), PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port), *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.perf_counter()
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        if time.perf_counter() - t0 > 600:
            raise RuntimeError("server not healthy in 600 s")
        time.sleep(0.2)


def counters(url) -> dict:
    text = httpx.get(f"{url}/metrics", timeout=30).text
    out = {}
    for name in ("spec_decode_num_drafts", "spec_decode_num_draft_tokens",
                 "spec_decode_num_accepted_tokens", "generation_tokens"):
        m = re.search(rf"^\w+:{name}_total\{{[^}}]*\}} ([0-9.e+]+)$", text, re.M)
        out[name] = float(m.group(1)) if m else 0.0
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--port", type=int, default=8447)
    ap.add_argument("--sets", default="default,off")
    a = ap.parse_args()
    extra = {"default": [], "off": ["--draft", "off"]}
    res = {s: [] for s in a.sets.split(",")}
    for rep in range(a.rounds):
        for s in res:
            proc, url = start(a.port, a.threads, extra[s])
            try:
                ours(url, 1, 1, 16, 8, 99)                       # warm
                c0 = counters(url)
                t = time.perf_counter()
                r = ours(url, 1, 3, 64, 64, 100 + 10 * rep)
                wall = time.perf_counter() - t
                c1 = counters(url)
            finally:
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
            d = {k: c1[k] - c0[k] for k in c0}
            row = {"set": s, "round": rep, "tpot_ms": r["tpot_ms"]["median"], "wall_s": wall,
                   "verify_chunks": d["spec_decode_num_drafts"], "drafted": d["spec_decode_num_draft_tokens"],
                   "accepted": d["spec_decode_num_accepted_tokens"], "generated": d["generation_tokens"],
                   "load": os.getloadavg()}
            res[s].append(row)
            print(json.dumps(row), flush=True)
    for s, rows in res.items():
        tp = sorted(r["tpot_ms"] for r in rows)
        tps = ", ".join(f"{r['tpot_ms']:.1f}" for r in rows)
        print(f"{s:8s} TPOT ms {tps} (median {tp[len(tp) // 2]:.1f}); "
              f"drafted {sum(r['drafted'] for r in rows):.0f}, accepted {sum(r['accepted'] for r in rows):.0f}, "
              f"verify chunks {sum(r['verify_chunks'] for r in rows):.0f}, generated {sum(r['generated'] for r in rows):.0f}")


if __name__ == "__main__":
    main()
