"""Drafts through the server (issue 35's targets): the default model, n-gram drafts on
against "draft": false on the same server, alternated round by round so both see the same
noise on a shared machine.

  editing  batch 1: a ~1k-token file returned with one change (tests/drafts/editing.py's
           diff-like completion prompt), greedy, streamed: decode tokens/s after the first
           token, and the acceptance (/metrics' spec_decode counters around the run)
  prose    batch 1: a short-story chat request, greedy, streamed: the same numbers
  16x      16 different chat requests at once (greedy): completion tokens / wall seconds
Each drafted reply is compared with its plain twin (text and finish reason) and the
equality printed. Prints every round, then a JSON summary (medians and ratios); --out DIR
writes results.json and log.txt there.

  python3 bench/drafts.py [--rounds 3] [--port 8124] [--edit-tokens 400] [--out DIR]
                         [--draft-tokens N] [--draft-row-cost F]
  python3 bench/drafts.py --llama-server PATH [--rounds 3] [--out DIR]   # the peer instead
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import httpx

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "drafts"))

from editing import PROSE, editing_prompt  # noqa: E402

TOPICS = ["the moon", "a river", "bread", "winter", "a violin", "trains", "bees", "a city at night",
          "the desert", "a library", "volcanoes", "a garden", "the ocean floor", "a market",
          "mountains", "a storm"]


def start_server(port, extra):
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--parallel", "16", "--context", "2048", *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 600:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError("server not healthy in 600 s")


SERVER_PID = [None]


def cpu_seconds() -> float:
    """The server process's CPU time (every thread: numba's team too), user + system: on a
    machine others load, tokens per CPU second move less than tokens per wall second."""
    f = open(f"/proc/{SERVER_PID[0]}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def counters(url) -> dict:
    out = {}
    for line in httpx.get(url + "/metrics").text.splitlines():
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            if line.startswith(f"vllm:spec_decode_{name}_total{{"):
                out[name] = float(line.rsplit(" ", 1)[1])
    return out


def streamed(url, path, body) -> dict:
    """One streamed request: its text, finish reason, tokens, and decode tokens/s after the
    first token (tokens - 1 over the seconds from the first to the last chunk)."""
    body = dict(body, stream=True, stream_options={"include_usage": True})
    text, finish, tokens, first, last = [], None, 0, None, None
    with httpx.stream("POST", url + path, json=body, timeout=900) as r:
        for line in r.iter_lines():
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            now = time.perf_counter()
            for c in ev.get("choices", []):
                piece = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    first = first or now
                    last = now
                finish = c.get("finish_reason") or finish
            if ev.get("usage"):
                tokens = ev["usage"]["completion_tokens"]
    secs = (last - first) if first and last and last > first else float("nan")
    return {"text": "".join(text), "finish": finish, "tokens": tokens,
            "decode_tps": (tokens - 1) / secs if tokens > 1 else float("nan")}


def single(url, kind, drafted, edit_tokens, prose_tokens=256):
    if kind == "editing":
        path, body = "/v1/completions", {"prompt": editing_prompt(), "max_tokens": edit_tokens,
                                         "temperature": 0}
    else:
        path, body = "/v1/chat/completions", {"messages": PROSE, "max_tokens": prose_tokens,
                                              "temperature": 0}
    if not drafted:
        body["draft"] = False
    before, c0 = counters(url), cpu_seconds()
    r = streamed(url, path, body)
    after, c1 = counters(url), cpu_seconds()
    r["cpu_tps"] = r["tokens"] / (c1 - c0) if c1 > c0 else float("nan")
    d = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    r.update(drafts=d.get("num_drafts", 0), draft_tokens=d.get("num_draft_tokens", 0),
             accepted=d.get("num_accepted_tokens", 0))
    return r


def concurrent(url, drafted, n=16, tokens=64):
    """16 chat requests at once; the prompts are the same every call (replies compared)."""
    bodies = [{"messages": [{"role": "user", "content": f"Write a few sentences about {t}."}],
               "max_tokens": tokens, "temperature": 0, "ignore_eos": True} for t in TOPICS[:n]]
    if not drafted:
        bodies = [dict(b, draft=False) for b in bodies]
    before, c0 = counters(url), cpu_seconds()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as ex:
        rs = list(ex.map(lambda b: httpx.post(url + "/v1/chat/completions", json=b, timeout=900), bodies))
    secs = time.perf_counter() - t0
    after, c1 = counters(url), cpu_seconds()
    done = sum(r.json()["usage"]["completion_tokens"] for r in rs)
    return {"tps": done / secs, "tokens": done, "seconds": secs, "cpu_tps": done / (c1 - c0),
            "texts": [r.json()["choices"][0]["message"]["content"] for r in rs],
            "draft_tokens": after.get("num_draft_tokens", 0) - before.get("num_draft_tokens", 0)}


def peer(binary, model, port, spec, rounds, edit_tokens) -> list:
    """llama.cpp's llama-server on the same file, with `--spec-type spec` (none: plain):
    the editing and prose requests, greedy, not streamed; its own timings'
    predicted_per_second and its texts."""
    cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(port), "-t", "2",
           "-c", "4096", "--spec-type", spec]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        t0 = time.monotonic()
        while True:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() - t0 > 300 or proc.poll() is not None:
                raise RuntimeError(f"llama-server ({spec}) did not start")
            time.sleep(0.5)
        out = []
        for _ in range(rounds):
            for kind, path, body in (
                    ("editing", "/v1/completions", {"prompt": editing_prompt(), "max_tokens": edit_tokens}),
                    ("prose", "/v1/chat/completions", {"messages": PROSE, "max_tokens": 256})):
                r = httpx.post(url + path, json={**body, "temperature": 0}, timeout=900).json()
                c = r["choices"][0]
                out.append({"kind": kind, "spec": spec, "tps": r["timings"]["predicted_per_second"],
                            "text": c.get("text") if "text" in c else c["message"]["content"],
                            "draft_n": r["timings"].get("draft_n"),
                            "draft_accepted": r["timings"].get("draft_n_accepted")})
                print(json.dumps({k: v for k, v in out[-1].items() if k != "text"}
                                 | {"chars": len(out[-1]["text"]),
                                    "loadavg": os.getloadavg()}), flush=True)
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def peers(a) -> int:
    from server.engine.locate import resolve
    model = resolve(None)
    runs = []
    for rnd in range(a.rounds):                      # alternate the two servers by round
        for spec in (("none", "ngram-simple") if rnd % 2 == 0 else ("ngram-simple", "none")):
            runs += peer(a.llama_server, model, a.port + 1, spec, 1, a.edit_tokens)
    summary = {}
    for kind in ("editing", "prose"):
        p = [r for r in runs if r["kind"] == kind and r["spec"] == "none"]
        d = [r for r in runs if r["kind"] == kind and r["spec"] != "none"]
        summary[kind] = {"plain_tps": statistics.median(r["tps"] for r in p),
                         "drafted_tps": statistics.median(r["tps"] for r in d),
                         "drafted_equals_plain": [x["text"] == y["text"] for x, y in zip(p, d)],
                         "draft_n": [r["draft_n"] for r in d], "accepted": [r["draft_accepted"] for r in d]}
        summary[kind]["ratio"] = summary[kind]["drafted_tps"] / summary[kind]["plain_tps"]
    print(json.dumps(summary, indent=1))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "llama_server.json"), "w") as f:
            json.dump({"runs": runs, "summary": summary, "loadavg": os.getloadavg()}, f, indent=1)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8124)
    ap.add_argument("--edit-tokens", type=int, default=400)
    ap.add_argument("--draft-tokens", type=int, default=None)
    ap.add_argument("--draft-row-cost", type=float, default=None,
                    help="the server's --draft-row-cost (default: its own)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--llama-server", default=None, metavar="PATH",
                    help="instead: llama.cpp's llama-server on the same file and prompts, "
                         "--spec-type none against ngram-simple")
    a = ap.parse_args(argv)
    if a.llama_server:
        return peers(a)
    extra = ["--draft", "ngram"] + (["--draft-tokens", str(a.draft_tokens)] if a.draft_tokens else []) \
        + (["--draft-row-cost", str(a.draft_row_cost)] if a.draft_row_cost is not None else [])
    log_lines = []

    def say(s):
        print(s, flush=True)
        log_lines.append(s)

    proc, url = start_server(a.port, extra)
    SERVER_PID[0] = proc.pid
    rows = []
    try:
        # warm: compile, and every prompt into the prompt cache, so neither twin of a pair
        # pays a prefill the other skips
        single(url, "prose", True, 1, prose_tokens=1)
        single(url, "editing", True, 1)
        concurrent(url, True, tokens=1)
        for rnd in range(a.rounds):
            row = {"round": rnd}
            for kind in ("editing", "prose"):
                order = (False, True) if rnd % 2 == 0 else (True, False)
                got = {dr: single(url, kind, dr, a.edit_tokens) for dr in order}
                p, d = got[False], got[True]
                row[kind] = {"plain_tps": p["decode_tps"], "drafted_tps": d["decode_tps"],
                             "ratio": d["decode_tps"] / p["decode_tps"], "tokens": d["tokens"],
                             "plain_cpu_tps": p["cpu_tps"], "drafted_cpu_tps": d["cpu_tps"],
                             "cpu_ratio": d["cpu_tps"] / p["cpu_tps"],
                             "equal": (p["text"], p["finish"]) == (d["text"], d["finish"]),
                             "drafts": d["drafts"], "draft_tokens": d["draft_tokens"],
                             "accepted": d["accepted"],
                             "tokens_per_verify": (d["accepted"] + d["drafts"]) / d["drafts"]
                             if d["drafts"] else None}
                say(f"round {rnd} {kind}: plain {p['decode_tps']:.1f} tok/s, drafted "
                    f"{d['decode_tps']:.1f} tok/s ({row[kind]['ratio']:.2f}x; per CPU second "
                    f"{p['cpu_tps']:.1f} vs {d['cpu_tps']:.1f}, {row[kind]['cpu_ratio']:.2f}x), {d['tokens']} tokens, "
                    f"drafted {d['draft_tokens']:.0f} accepted {d['accepted']:.0f} in "
                    f"{d['drafts']:.0f} verify chunks, equal={row[kind]['equal']}")
            order = (False, True) if rnd % 2 == 0 else (True, False)
            got = {dr: concurrent(url, dr) for dr in order}
            p, d = got[False], got[True]
            row["x16"] = {"plain_tps": p["tps"], "drafted_tps": d["tps"], "ratio": d["tps"] / p["tps"],
                          "plain_cpu_tps": p["cpu_tps"], "drafted_cpu_tps": d["cpu_tps"],
                          "cpu_ratio": d["cpu_tps"] / p["cpu_tps"],
                          "equal": p["texts"] == d["texts"], "draft_tokens": d["draft_tokens"]}
            say(f"round {rnd} 16 concurrent: plain {p['tps']:.1f} tok/s, drafted {d['tps']:.1f} "
                f"tok/s ({row['x16']['ratio']:.2f}x; per CPU second {row['x16']['cpu_ratio']:.2f}x), "
                f"drafted tokens {d['draft_tokens']:.0f}, "
                f"equal={row['x16']['equal']}")
            rows.append(row)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    summary = {k: {f: statistics.median(r[k][f] for r in rows)
                   for f in ("plain_tps", "drafted_tps", "ratio", "plain_cpu_tps", "drafted_cpu_tps",
                             "cpu_ratio")} for k in ("editing", "prose", "x16")}
    for k in ("editing", "prose"):
        acc = sum(r[k]["accepted"] for r in rows)
        dt = sum(r[k]["draft_tokens"] for r in rows)
        summary[k]["acceptance"] = acc / dt if dt else None
    for k in ("editing", "prose", "x16"):
        summary[k]["all_equal"] = all(r[k]["equal"] for r in rows)
    out = {"rounds": rows, "summary": summary, "server_flags": extra, "loadavg": os.getloadavg()}
    say(json.dumps(summary))
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(out, f, indent=1)
        with open(os.path.join(a.out, "log.txt"), "w") as f:
            f.write("\n".join(log_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
