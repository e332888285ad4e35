"""Drafts through the server (issue 35's targets): the default model, n-gram drafts on
against "draft": false on the same server, alternated round by round so both see the same
noise on a shared machine.

  editing  batch 1, the editing set (tests/drafts/editing.py's EDIT_SET: five ~1k-token
           files, each to be returned with one change, in its diff-like completion
           framing; the set and the rule that picked it are that file's docstring), every
           prompt in turn, greedy, streamed: decode tokens/s after the first token, and
           the acceptance (/metrics' spec_decode counters around the run)
  prose    batch 1: a short-story chat request, greedy, streamed: the same numbers
  16x      16 different chat requests at once (greedy): completion tokens / wall seconds,
           --x16-pairs plain/drafted pairs a round pooled (default 3)
Each drafted reply is compared with its plain twin (text and finish reason) and the
equality printed. The server keeps a 1 GiB prompt cache (23,296 rows; the default 0.25
GiB, 5,824 rows, holds fewer than the set's five prompts with their replies), and every
prompt is asked once before the rounds, so neither twin of a pair pays a prefill the other
skips. Prints every round, then a JSON summary (medians and ratios); --out DIR writes
results.json and log.txt there.

The editing numbers, printed each on its own line at the end:
  the old single prompt  pool.py (the set's first, the one prompt of earlier receipts):
                         the median of its per-round ratios, as before (summary "editing")
  per prompt             its decode tokens over its decode seconds, summed over the rounds,
                         each side; the ratio drafted / plain
  the set's aggregate    every prompt's and round's decode tokens over their decode seconds,
                         each side (total tokens / total wall), and its ratio: the verdict
                         line's number (issue 35's target: at least 1.8x); beside it the
                         geometric mean of the per-prompt ratios

  python3 bench/drafts.py [--rounds 3] [--port 8124] [--edit-tokens 400] [--out DIR]
                         [--draft-tokens N] [--draft-row-cost F]
  python3 bench/drafts.py --llama-server PATH [--rounds 3] [--out DIR]   # the peer instead
"""
from __future__ import annotations

import argparse
import json
import math
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

from editing import EDIT_SET, PROSE  # noqa: E402

TARGET = 1.8    # issue 35: the editing set at batch 1, drafted / plain decode

TOPICS = ["the moon", "a river", "bread", "winter", "a violin", "trains", "bees", "a city at night",
          "the desert", "a library", "volcanoes", "a garden", "the ocean floor", "a market",
          "mountains", "a storm"]


def start_server(port, extra):
    env = dict(os.environ, PYTHONPATH=ROOT)
    cmd = [sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port),
           "--parallel", "16", "--context", "2048", "--prompt-cache-gib", "1", *extra]
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
    return {"text": "".join(text), "finish": finish, "tokens": tokens, "decode_secs": secs,
            "decode_tps": (tokens - 1) / secs if tokens > 1 else float("nan")}


def single(url, kind, drafted, edit_tokens, prose_tokens=256, prompt=None):
    """kind "editing": `prompt` (an editing set's prompt) as a completion; "prose": PROSE."""
    if kind == "editing":
        path, body = "/v1/completions", {"prompt": prompt, "max_tokens": edit_tokens,
                                         "temperature": 0}
    else:
        path, body = "/v1/chat/completions", {"messages": PROSE, "max_tokens": prose_tokens,
                                              "temperature": 0}
    if not drafted:
        body["draft"] = False
    before, c0 = counters(url), cpu_seconds()
    r = streamed(url, path, body)
    after, c1 = counters(url), cpu_seconds()
    r["cpu_secs"] = c1 - c0
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


def pooled16(reps) -> dict:
    """Several runs of `concurrent` as one: tokens over seconds (wall and CPU) pooled; texts the
    first run's, equal only if every run gave the same texts."""
    tok = sum(r["tokens"] for r in reps)
    texts = reps[0]["texts"] if all(r["texts"] == reps[0]["texts"] for r in reps) else None
    return {"tps": tok / sum(r["seconds"] for r in reps), "tokens": tok,
            "seconds": sum(r["seconds"] for r in reps),
            "cpu_tps": tok / sum(r["tokens"] / r["cpu_tps"] for r in reps), "texts": texts,
            "draft_tokens": sum(r["draft_tokens"] for r in reps), "runs": len(reps)}


def geomean(xs) -> float:
    xs = list(xs)
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def peer(binary, model, port, spec, rounds, edit_tokens) -> list:
    """llama.cpp's llama-server on the same file, with `--spec-type spec` (none: plain):
    every editing set prompt and the prose request, greedy, not streamed; its own timings
    (predicted_per_second, predicted_n, predicted_ms) and its texts."""
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
        asks = [("editing", t.name, "/v1/completions", {"prompt": t.prompt(), "max_tokens": edit_tokens})
                for t in EDIT_SET]
        asks.append(("prose", "prose", "/v1/chat/completions", {"messages": PROSE, "max_tokens": 256}))
        out = []
        for _ in range(rounds):
            for kind, name, path, body in asks:
                r = httpx.post(url + path, json={**body, "temperature": 0}, timeout=900).json()
                c, tm = r["choices"][0], r["timings"]
                out.append({"kind": kind, "prompt": name, "spec": spec,
                            "tps": tm["predicted_per_second"], "predicted_n": tm["predicted_n"],
                            "predicted_ms": tm["predicted_ms"],
                            "text": c.get("text") if "text" in c else c["message"]["content"],
                            "draft_n": tm.get("draft_n"), "draft_accepted": tm.get("draft_n_accepted")})
                print(json.dumps({k: v for k, v in out[-1].items() if k != "text"}
                                 | {"chars": len(out[-1]["text"]),
                                    "loadavg": os.getloadavg()}), flush=True)
        return out
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def peer_summary(p, d) -> dict:
    """One prompt's runs, plain `p` and drafted `d`, paired in order."""
    s = {"plain_tps": statistics.median(r["tps"] for r in p),
         "drafted_tps": statistics.median(r["tps"] for r in d),
         "drafted_equals_plain": [x["text"] == y["text"] for x, y in zip(p, d)],
         "draft_n": [r["draft_n"] for r in d], "accepted": [r["draft_accepted"] for r in d]}
    s["ratio"] = s["drafted_tps"] / s["plain_tps"]
    return s


def peers(a) -> int:
    from server.engine.locate import resolve
    model = resolve(None)
    runs = []
    for rnd in range(a.rounds):                      # alternate the two servers by round
        for spec in (("none", "ngram-simple") if rnd % 2 == 0 else ("ngram-simple", "none")):
            runs += peer(a.llama_server, model, a.port + 1, spec, 1, a.edit_tokens)
    side = {sp: [r for r in runs if r["spec"] == sp] for sp in ("none", "ngram-simple")}
    per = {name: peer_summary(*([r for r in side[sp] if r["prompt"] == name]
                                for sp in ("none", "ngram-simple")))
           for name in [t.name for t in EDIT_SET] + ["prose"]}
    agg = {}
    for sp, key in (("none", "plain_tps"), ("ngram-simple", "drafted_tps")):
        ed = [r for r in side[sp] if r["kind"] == "editing"]
        agg[key] = sum(r["predicted_n"] for r in ed) / (sum(r["predicted_ms"] for r in ed) / 1e3)
    agg["ratio"] = agg["drafted_tps"] / agg["plain_tps"]
    agg["geomean_ratio"] = geomean(per[t.name]["ratio"] for t in EDIT_SET)
    eq = [e for t in EDIT_SET for e in per[t.name]["drafted_equals_plain"]]
    agg["drafted_equals_plain"] = f"{sum(eq)} of {len(eq)}"
    summary = {"editing": per[EDIT_SET[0].name], "prose": per["prose"],
               "edit_set": {"prompts": {t.name: per[t.name] for t in EDIT_SET}, "aggregate": agg}}
    print(json.dumps(summary, indent=1))
    for name, s in per.items():
        print(f"llama-server {name}: plain {s['plain_tps']:.1f} tok/s, ngram-simple "
              f"{s['drafted_tps']:.1f} tok/s ({s['ratio']:.2f}x), drafted == plain "
              f"{sum(s['drafted_equals_plain'])} of {len(s['drafted_equals_plain'])}, "
              f"drafted {s['draft_n']} accepted {s['accepted']}")
    print(f"llama-server editing set aggregate: plain {agg['plain_tps']:.1f} tok/s, ngram-simple "
          f"{agg['drafted_tps']:.1f} tok/s ({agg['ratio']:.2f}x; geo-mean of the per-prompt "
          f"ratios {agg['geomean_ratio']:.2f}x), drafted == plain {agg['drafted_equals_plain']}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "llama_server.json"), "w") as f:
            json.dump({"runs": runs, "summary": summary, "loadavg": os.getloadavg()}, f, indent=1)
    return 0


def pair_row(p, d) -> dict:
    """One round's plain and drafted replies of one request."""
    return {"plain_tps": p["decode_tps"], "drafted_tps": d["decode_tps"],
            "ratio": d["decode_tps"] / p["decode_tps"], "tokens": d["tokens"],
            "plain_decode_secs": p["decode_secs"], "drafted_decode_secs": d["decode_secs"],
            "plain_cpu_secs": p["cpu_secs"], "drafted_cpu_secs": d["cpu_secs"],
            "plain_cpu_tps": p["cpu_tps"], "drafted_cpu_tps": d["cpu_tps"],
            "cpu_ratio": d["cpu_tps"] / p["cpu_tps"],
            "equal": (p["text"], p["finish"]) == (d["text"], d["finish"]),
            "drafts": d["drafts"], "draft_tokens": d["draft_tokens"], "accepted": d["accepted"],
            "tokens_per_verify": (d["accepted"] + d["drafts"]) / d["drafts"] if d["drafts"] else None}


def pooled(cells) -> dict:
    """Decode tokens over decode seconds summed over `cells` (pair_row dicts), each side;
    per CPU second the same with completion tokens over the server's CPU seconds."""
    dec = sum(c["tokens"] - 1 for c in cells)
    tok = sum(c["tokens"] for c in cells)
    out = {"plain_tps": dec / sum(c["plain_decode_secs"] for c in cells),
           "drafted_tps": dec / sum(c["drafted_decode_secs"] for c in cells),
           "plain_cpu_tps": tok / sum(c["plain_cpu_secs"] for c in cells),
           "drafted_cpu_tps": tok / sum(c["drafted_cpu_secs"] for c in cells),
           "tokens": tok, "all_equal": all(c["equal"] for c in cells)}
    out["ratio"] = out["drafted_tps"] / out["plain_tps"]
    out["cpu_ratio"] = out["drafted_cpu_tps"] / out["plain_cpu_tps"]
    acc, dt = sum(c["accepted"] for c in cells), sum(c["draft_tokens"] for c in cells)
    out["acceptance"] = acc / dt if dt else None
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--port", type=int, default=8124)
    ap.add_argument("--edit-tokens", type=int, default=400)
    ap.add_argument("--draft-tokens", type=int, default=None)
    ap.add_argument("--draft-row-cost", type=float, default=None,
                    help="the server's --draft-row-cost (default: its own)")
    ap.add_argument("--x16-pairs", type=int, default=3,
                    help="plain/drafted pairs of the 16-stream run a round (pooled)")
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
    names = [t.name for t in EDIT_SET]
    try:
        # warm: compile, and every prompt into the prompt cache, so neither twin of a pair
        # pays a prefill the other skips
        single(url, "prose", True, 1, prose_tokens=1)
        for t in EDIT_SET:
            single(url, "editing", True, 1, prompt=t.prompt())
        concurrent(url, True, tokens=1)
        for rnd in range(a.rounds):
            row = {"round": rnd, "edit_set": {}}
            order = (False, True) if rnd % 2 == 0 else (True, False)
            for kind, task in [("editing", t) for t in EDIT_SET] + [("prose", None)]:
                got = {dr: single(url, kind, dr, a.edit_tokens, prompt=task and task.prompt())
                       for dr in order}
                p, d = got[False], got[True]
                cell = pair_row(p, d)
                if task is None:
                    row["prose"], label = cell, "prose"
                else:
                    row["edit_set"][task.name], label = cell, f"editing {task.name}"
                say(f"round {rnd} {label}: plain {p['decode_tps']:.1f} tok/s, drafted "
                    f"{d['decode_tps']:.1f} tok/s ({cell['ratio']:.2f}x; per CPU second "
                    f"{p['cpu_tps']:.1f} vs {d['cpu_tps']:.1f}, {cell['cpu_ratio']:.2f}x), {d['tokens']} tokens, "
                    f"drafted {d['draft_tokens']:.0f} accepted {d['accepted']:.0f} in "
                    f"{d['drafts']:.0f} verify chunks, equal={cell['equal']}")
            row["editing"] = row["edit_set"][names[0]]       # the old single prompt's, as before
            s = pooled(row["edit_set"].values())
            say(f"round {rnd} editing set ({len(names)} prompts): plain {s['plain_tps']:.1f} tok/s, "
                f"drafted {s['drafted_tps']:.1f} tok/s ({s['ratio']:.2f}x; per CPU second "
                f"{s['cpu_ratio']:.2f}x), equal={s['all_equal']}, loadavg {os.getloadavg()}")
            # the 16 streams' pairs (each ~3 s, so one pair is noisy): x16_pairs of them, in
            # alternating order, each side's tokens over its seconds pooled
            reps = {False: [], True: []}
            for k in range(a.x16_pairs):
                for dr in (order if k % 2 == 0 else order[::-1]):
                    reps[dr].append(concurrent(url, dr))
            p, d = (pooled16(reps[False]), pooled16(reps[True]))
            row["x16"] = {"plain_tps": p["tps"], "drafted_tps": d["tps"], "ratio": d["tps"] / p["tps"],
                          "plain_cpu_tps": p["cpu_tps"], "drafted_cpu_tps": d["cpu_tps"],
                          "cpu_ratio": d["cpu_tps"] / p["cpu_tps"],
                          "equal": p["texts"] is not None and p["texts"] == d["texts"], "draft_tokens": d["draft_tokens"]}
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
    per = {n: pooled([r["edit_set"][n] for r in rows]) for n in names}
    agg = pooled([r["edit_set"][n] for r in rows for n in names])
    agg["geomean_ratio"] = geomean(per[n]["ratio"] for n in names)
    agg["geomean_cpu_ratio"] = geomean(per[n]["cpu_ratio"] for n in names)
    agg["target"] = TARGET
    agg["met"] = agg["ratio"] >= TARGET
    summary["edit_set"] = {"prompts": per, "aggregate": agg}
    out = {"rounds": rows, "summary": summary, "server_flags": extra, "loadavg": os.getloadavg()}
    say(json.dumps(summary))
    e = summary["editing"]
    say(f"editing, the old single prompt ({names[0]}): plain {e['plain_tps']:.1f} tok/s, drafted "
        f"{e['drafted_tps']:.1f} tok/s, median of the per-round ratios {e['ratio']:.2f}x "
        f"(per CPU second {e['cpu_ratio']:.2f}x), equal={e['all_equal']}")
    for n in names:
        s = per[n]
        say(f"editing set, {n}: plain {s['plain_tps']:.1f} tok/s, drafted {s['drafted_tps']:.1f} "
            f"tok/s ({s['ratio']:.2f}x; per CPU second {s['cpu_ratio']:.2f}x), {s['tokens']} tokens "
            f"over {len(rows)} rounds, acceptance {s['acceptance'] or 0:.2f}, equal={s['all_equal']}")
    say(f"editing set aggregate ({len(names)} prompts x {len(rows)} rounds): plain "
        f"{agg['plain_tps']:.1f} tok/s, drafted {agg['drafted_tps']:.1f} tok/s: {agg['ratio']:.2f}x "
        f"(per CPU second {agg['cpu_ratio']:.2f}x); geo-mean of the per-prompt ratios "
        f"{agg['geomean_ratio']:.2f}x (per CPU second {agg['geomean_cpu_ratio']:.2f}x); "
        f"equal={agg['all_equal']}")
    say(f"verdict: editing set aggregate {agg['ratio']:.2f}x plain, target {TARGET}x: "
        f"{'met' if agg['met'] else 'not met'}; loadavg {os.getloadavg()}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump(out, f, indent=1)
        with open(os.path.join(a.out, "log.txt"), "w") as f:
            f.write("\n".join(log_lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
