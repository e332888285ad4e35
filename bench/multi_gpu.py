"""Ranks on GPUs, end to end, in one run: what issues "Ranks" and "TP=2 and TP=3 over NCCL"
ask of real GPU ranks. Every stage starts real `foldserve serve` processes.

  golden     TP=1 (an NCCL communicator of one) and TP=2: golden cases through /v1/completions
  solo       16 greedy requests alone, then all at once: identical text
  rooms      TP=2 ranks started by hand with other TF_ROOM_GIB: one pool, sized by the smaller;
             32 mixed requests (8 cut off mid-stream); every rank's tables equal at the end
  mismatch   TP=2 with TF_KV_PAGES on and off: both ranks stop, naming the field and rank
  speed      llama3-8b shape: ms per decode step at batch 1, tokens/s at 64 concurrent
             (512 in / 256 out), TP=1 against TP=2; NCCL all-reduce time per step

Usage: python3 bench/multi_gpu.py --out DIR [--device cuda] [--model M] [--stages a,b]
       [--tps 1,2] [--speed-model dummy:llama3-8b]
Writes DIR/results.json and one log per server.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests/data/smollm2-135m-instruct-q4_1.json"
R: dict = {}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, out: Path, name: str, args: list, env: dict | None = None, port=None):
        self.port = port or free_port()
        self.log = out / f"{name}.log"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "server.cli", "serve", "--port", str(self.port), *args],
            cwd=ROOT, env={**os.environ, **(env or {})}, stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT, start_new_session=True)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait(self, timeout=300):
        t = time.time()
        while time.time() - t < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.log.name}: exited {self.proc.returncode}: {self.tail()}")
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    return time.time() - t
            except httpx.HTTPError:
                pass
            time.sleep(1)
        raise TimeoutError(f"{self.log.name}: no /health in {timeout} s: {self.tail()}")

    def tail(self, n=1500):
        return self.log.read_text(errors="replace")[-n:]

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.proc.returncode


def complete(url, ids, n, timeout=300):
    r = httpx.post(url + "/v1/completions", timeout=timeout, json={
        "prompt": ids, "max_tokens": n, "temperature": 0, "ignore_eos": True})
    r.raise_for_status()
    return r.json()["choices"][0]["text"]


def golden_check(url, cases):
    out = []
    for c in cases:
        n = c["exact_prefix"]
        want = httpx.post(url + "/detokenize", json={"tokens": c["greedy_ids"][:n]}).json()["prompt"]
        got = complete(url, c["prompt_ids"], n)
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        out.append({"case": c["name"], "equal": got == want, "first_diff_char": first})
    return out


def prompts16(cases):
    ps = [c["prompt_ids"] for c in cases]
    ps += [[(7 * i + 13 * j) % 20000 + 100 for j in range(5 + 9 * i)] for i in range(16 - len(ps))]
    return ps


def solo_vs_concurrent(url, ps, n=24):
    solo = [complete(url, p, n) for p in ps]
    with cf.ThreadPoolExecutor(len(ps)) as ex:
        together = list(ex.map(lambda p: complete(url, p, n), ps))
    return {"requests": len(ps), "equal": sum(a == b for a, b in zip(solo, together))}


def stage_golden(a, out, cases):
    for tp in a.tps:
        s = Server(out, f"golden-tp{tp}", ["--tp", str(tp), "--device", a.device,
                                            "--context", "2048", "--parallel", "16"],
                   {"TF_KV_PAGES": "on"})
        try:
            R[f"golden_tp{tp}_start_s"] = s.wait()
            R[f"golden_tp{tp}"] = golden_check(s.url, cases)
            R[f"solo_tp{tp}"] = solo_vs_concurrent(s.url, prompts16(cases))
            R[f"golden_tp{tp}_startup"] = [l for l in s.tail(20000).splitlines()
                                           if "streams at once" in l or l.startswith("serving")]
        finally:
            R[f"golden_tp{tp}_exit"] = s.stop()


def _stream_cut(url, ids):
    with httpx.stream("POST", url + "/v1/completions", timeout=120, json={
            "prompt": ids, "max_tokens": 64, "temperature": 0, "ignore_eos": True, "stream": True}) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i >= 3:
                return "cut"
    return "ended"


def stage_rooms(a, out, cases):
    port = free_port()
    master = f"127.0.0.1:{port}"
    common = ["--tp", "2", "--device", a.device, "--master", master, "--context", "2048",
              "--parallel", "8", "--prompt-cache-gib", "0"]
    caps = {0: "0.2", 1: "0.08"}   # small enough that the rooms, not --parallel, size the pool
    follower = Server(out, "rooms-rank1", common + ["--rank", "1"],
                      {"TF_KV_PAGES": "on", "TF_ROOM_GIB": caps[1]})
    lead = Server(out, "rooms-rank0", common + ["--rank", "0"],
                  {"TF_KV_PAGES": "on", "TF_ROOM_GIB": caps[0]})
    try:
        lead.wait()
        ps = prompts16(cases) * 2
        with cf.ThreadPoolExecutor(32) as ex:
            futs = [ex.submit(_stream_cut, lead.url, p) if i % 4 == 0 else
                    ex.submit(complete, lead.url, p, 8 + i % 17) for i, p in enumerate(ps)]
            R["rooms_requests"] = [("ok" if isinstance(f.result(), str) else "?") for f in futs]
        time.sleep(2)
        R["rooms_health"] = httpx.get(lead.url + "/health").json()
    finally:
        R["rooms_exit"] = [lead.stop(), follower.stop()]
    for who, s in (("rank0", lead), ("rank1", follower)):
        text = s.log.read_text(errors="replace")
        R[f"rooms_{who}_kv"] = re.findall(r"rank \d: KV store .*", text)
        R[f"rooms_{who}_tables"] = re.findall(r"rank \d: \d+ tables mapped.*", text)
    R["rooms_startup"] = [l for l in lead.log.read_text().splitlines() if "streams at once" in l]


def stage_mismatch(a, out, cases):
    port = free_port()
    common = ["--tp", "2", "--device", a.device, "--master", f"127.0.0.1:{port}",
              "--context", "1024"]
    f = Server(out, "mismatch-rank1", common + ["--rank", "1"], {"TF_KV_PAGES": "off"})
    l = Server(out, "mismatch-rank0", common + ["--rank", "0"], {"TF_KV_PAGES": "on"})
    t = time.time()
    codes = []
    for s in (l, f):
        try:
            codes.append(s.proc.wait(60))
        except subprocess.TimeoutExpired:
            codes.append("still running")
            s.stop()
    R["mismatch_exit"] = codes
    R["mismatch_seconds"] = round(time.time() - t, 1)
    R["mismatch_messages"] = [re.findall(r".*ranks disagree.*", s.log.read_text()) for s in (l, f)]


def bench(url, conc, n, inp, outp):
    r = subprocess.run([sys.executable, "-m", "server.cli", "bench", "--url", url, "--concurrency",
                        str(conc), "--requests", str(n), "--input-len", str(inp), "--output-len",
                        str(outp), "--json", "--timeout", "600"], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    try:
        return json.loads(r.stdout.strip().splitlines()[-1])
    except Exception:
        return {"error": r.stdout[-800:] + r.stderr[-800:]}


def stage_speed(a, out, cases):
    for tp in a.tps:
        s = Server(out, f"speed-tp{tp}", ["--tp", str(tp), "--device", a.device, "--model",
                                           a.speed_model, "--context", "1024", "--parallel", "64",
                                           "--prompt-cache-gib", "0"], {"TF_KV_PAGES": "off"})
        try:
            R[f"speed_tp{tp}_start_s"] = s.wait(600)
            # warm-up, not recorded: run-time kernel compiles and every CUDA-graph bucket's
            # capture happen here, not inside the measured runs
            R[f"speed_tp{tp}_warmup"] = bench(s.url, 64, 64, 64, 8).get("completed")
            R[f"speed_tp{tp}_batch1"] = bench(s.url, 1, 3, 128, 128)
            R[f"speed_tp{tp}_conc64"] = bench(s.url, 64, 64, 512, 256)
        finally:
            R[f"speed_tp{tp}_exit"] = s.stop()


def stage_allreduce(a, out, cases):
    if max(a.tps) < 2:
        return
    r = subprocess.run([sys.executable, str(ROOT / "bench/nccl_allreduce.py"), "--world", "2"],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    R["allreduce"] = r.stdout.strip().splitlines()[-1:] or r.stderr[-800:]


STAGES = {"golden": stage_golden, "rooms": stage_rooms, "mismatch": stage_mismatch,
          "speed": stage_speed, "allreduce": stage_allreduce}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--stages", default="golden,mismatch,rooms,allreduce,speed")
    ap.add_argument("--tps", default="1,2")
    ap.add_argument("--speed-model", default="dummy:llama3-8b")
    ap.add_argument("--golden", default=str(GOLDEN))
    a = ap.parse_args()
    a.tps = [int(x) for x in a.tps.split(",")]
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cases = json.loads(Path(a.golden).read_text())["cases"]
    for name in a.stages.split(","):
        t = time.time()
        try:
            STAGES[name](a, out, cases)
            R[f"{name}_ok"] = True
        except Exception as e:
            R[f"{name}_ok"] = f"{type(e).__name__}: {e}"[:2000]
        R[f"{name}_seconds"] = round(time.time() - t, 1)
        (out / "results.json").write_text(json.dumps(R, indent=1))
        print(f"{name}: {R[f'{name}_ok']} ({R[f'{name}_seconds']} s)", flush=True)
    print(json.dumps(R)[:6000])


if __name__ == "__main__":
    main()
