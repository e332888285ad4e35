"""Where a token's time goes at batch 1 through the server (TP=1, CPU): the engine step alone
beside the same step inside `foldserve serve`, the engine thread's work around it, and every
thread's CPU a token.

Three phases, each in a fresh process, run one after another (never two models loaded):
  engine  the engine alone (server/engine/engine.py's Engine.apply, the Steps the scheduler
          sends, greedy arg-max fed back): a --input-len prompt, then --output-len decode
          steps, --requests times: ms a step (median of the requests' means)
  serve   `foldserve serve` in a child whose scheduler is timed from outside (this file
          wraps Scheduler._round, its build_round, take_round and the driver's run; nothing
          in server/ changes): --requests b1 requests of --input-len tokens, --output-len
          out (`foldserve bench`'s client, streamed, as bench/cpu_serve.py's b1), then the
          same requests not streamed (/v1/completions, stream false, ignore_eos). Per
          decode round (one decoding stream, nothing else): the step (driver.run), the
          period (one round's start to the next's), the engine thread's time outside the
          step split into build / take (sampling + emit) / loop (inbox, admission); each
          thread's CPU seconds (/proc/self/task) over the window, a token.
  Client TPOT: `foldserve bench`'s median TPOT (streamed); not streamed: (e2e - TTFT of a
  1-token request) / (output-len - 1).

  python3 bench/serve_trace.py [--model-file F] [--threads 2] [--requests 3] [--port 8451]
Prints one JSON line at the end (phase results); --out FILE writes it too.
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# the tree whose server and engine run (--tree, for an A/B against another checkout's); this
# file itself may come from another tree
TREE = os.environ.get("SERVE_TRACE_TREE") or ROOT
sys.path.insert(0, TREE)


# ---------------------------------------------------------------- the traced server (child)
def _tasks() -> dict:
    """{tid: (name, cpu seconds)} of every thread of this process (schedstat: nanoseconds)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                ns = int(f.read().split()[0])
            with open(f"/proc/self/task/{tid}/comm") as f:
                name = f.read().strip()
        except OSError:
            continue
        out[int(tid)] = (name, ns / 1e9)
    return out


def child(argv: list[str], dump: str) -> None:
    import threading

    import server.scheduler as S
    import server.step_driver as D
    from server.ranks.steps import RoundStep

    rec = {"on": False, "rounds": [], "t0": None, "cpu0": None}
    cur = threading.local()
    pc = time.perf_counter

    build0, take0, round0, run0 = S.build_round, S.take_round, S.Scheduler._round, D.LocalDriver.run
    emit0 = S.Scheduler._emit
    cur.emit = 0.0

    def _emit(self, req_id, ev):
        t = pc()
        emit0(self, req_id, ev)
        cur.emit += pc() - t

    def build_round(*a, **k):
        t = pc()
        r = build0(*a, **k)
        cur.build = pc() - t
        return r

    eprof = None
    if os.environ.get("SERVE_TRACE_PROFILE") == "engine":
        import cProfile
        eprof = cProfile.Profile()
    prof = None
    if os.environ.get("SERVE_TRACE_PROFILE") == "take":     # cProfile of take_round
        import cProfile
        prof = cProfile.Profile()

    def take_round(*a, **k):
        t = pc()
        if prof is not None and rec["on"]:
            prof.enable()
            try:
                take0(*a, **k)
            finally:
                prof.disable()
        else:
            take0(*a, **k)
        cur.take = pc() - t

    def run(self, step):
        if not isinstance(step, RoundStep):
            return run0(self, step)
        t = pc()
        r = run0(self, step)
        cur.step = (t, pc())
        return r

    def _round(self):
        if eprof is not None:                     # the engine thread's whole rounds
            if rec["on"] and not cur.__dict__.get("prof_on"):
                eprof.enable()
                cur.prof_on = True
            elif not rec["on"] and cur.__dict__.get("prof_on"):
                eprof.disable()
                cur.prof_on = False
                eprof.dump_stats(dump + ".engine.prof")
                eprof.clear()
        t = pc()
        cur.emit = 0.0
        n0 = self.generation_tokens_done
        pre = any(a.prefilling for a in self.active.values())
        round0(self)
        e = pc()
        rec["engine_tid"] = threading.get_native_id()
        if rec["on"]:
            rows = sum(len(c.tokens) for c in cur.step_chunks) if hasattr(cur, "step_chunks") else 0
            rec["rounds"].append({"start": t, "end": e, "step0": cur.step[0], "step1": cur.step[1],
                                  "build": cur.build, "take": cur.take,
                                  "streams": len(self.active), "rows": rows, "emit": cur.emit,
                                  "tokens": self.generation_tokens_done - n0, "prefill": pre})

    def run_rows(self, step):                 # remember the round's rows (decode rounds: 1)
        if isinstance(step, RoundStep):
            cur.step_chunks = step.chunks
        return run(self, step)

    S.build_round, S.take_round, S.Scheduler._round = build_round, take_round, _round
    S.Scheduler._emit = _emit
    D.LocalDriver.run = run_rows

    lprof = None
    if os.environ.get("SERVE_TRACE_PROFILE") == "loop":     # cProfile of the main thread (the event loop)
        import cProfile
        lprof = cProfile.Profile()

    def on_usr1(signum, frame):                   # runs in the main thread: the event loop's
        if not rec["on"]:
            if lprof is not None:
                lprof.enable()
            rec["rounds"].clear()
            rec["t0"], rec["cpu0"] = pc(), _tasks()
            rec["on"] = True
            return
        rec["on"] = False
        t1, cpu1 = pc(), _tasks()
        if lprof is not None:
            lprof.disable()
            lprof.dump_stats(dump + ".loop.prof")
            lprof.clear()
        threads = {}
        for tid, (name, c) in cpu1.items():
            c0 = rec["cpu0"].get(tid, (name, 0.0))[1]
            key = ("engine thread" if tid == rec.get("engine_tid") else
                   "main (event loop)" if tid == os.getpid() else "others (numba, pools)")
            threads[key] = threads.get(key, 0.0) + c - c0
        if prof is not None:
            prof.dump_stats(dump + ".prof")
            prof.clear()
        with open(dump, "w") as f:
            json.dump({"wall": t1 - rec["t0"], "threads": threads, "rounds": rec["rounds"]}, f)

    signal.signal(signal.SIGUSR1, on_usr1)
    if argv and argv[0] == "stub":
        return stub_serve(*argv[1:])
    from server.cli import main
    sys.argv = ["foldserve"] + argv
    main()


def stub_serve(port: str, step_ms: str, tokenizer: str) -> None:
    """The real front end, scheduler and sampling over an engine that answers a round after
    sleeping step_ms (the GIL released, as the numba step releases it) with host float32
    logits [rows, vocab] of the tokenizer's vocabulary (a fixed set of rows whose arg-maxes
    are ordinary tokens): the host's own per-token cost, without a model's noise. No drafts
    (the stub's tokens follow no n-grams)."""
    import numpy as np

    from server.api.app import create_app
    from server.api.http_server import run_uvicorn
    from server.api.state import AppState
    from server.planner.admission import Admission
    from server.planner.layout import KV_BYTES, layouts
    from server.planner.plan import plan
    from server.ranks.steps import EVERY_ROW, RoundStep
    from server.scheduler import Scheduler
    from server.shapes.spec import SHAPES
    from server.step_driver import LocalDriver
    from server.text.tokenizer import Tokenizer
    tok = Tokenizer.from_gguf(tokenizer)
    vocab = tok.vocab_size
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((16, vocab)).astype(np.float32)
    for i in range(16):
        rows[i, 1000 + 37 * i] = 20.0
    spec = SHAPES["llama3-8b"]

    class Stub:
        device = "cpu"

        def __init__(self):
            self.n = 0

        def page_bytes(self, page_rows):
            return spec.n_layers * 2 * spec.n_kv_heads * spec.head_dim * 2 * page_rows

        def apply(self, step):
            if not isinstance(step, RoundStep):
                return None
            time.sleep(float(step_ms) / 1e3)
            n = sum(len(c.tokens) if c.logits == EVERY_ROW else int(bool(c.logits)) for c in step.chunks)
            self.n += 1
            return rows[[(self.n + i) % 16 for i in range(n)]]

    lays = layouts(spec, 1, KV_BYTES["cpu"], 16, 256)
    p = plan(lays, [8 << 30], 2048, 4, 0, "on", verify_window=1)
    driver = LocalDriver(Stub())
    driver.run(p.pool_step(False))
    sched = Scheduler(driver, Admission.from_plan(p, poison=False), context=2048,
                      prefill_chunk=256, token_budget=512).start()
    state = AppState(scheduler=sched, tokenizer=tok, model_name="stub", context=2048)
    run_uvicorn(create_app(state), "127.0.0.1", int(port), "warning")


# ---------------------------------------------------------------- the parent
def _median(xs):
    return statistics.median(xs) if xs else float("nan")


def analyse(d: dict, tokens: int) -> dict:
    """One window's rounds -> a token's time and its parts. Decode rounds: those no stream
    prefilled in (a decode row, or a verify chunk of it and its drafts); one round's period: its start to the next decode round's start (pairs of the
    same request, both decode rounds). ms a token = the periods' sum / their tokens."""
    rs = d["rounds"]
    dec = lambda r: (not r.get("prefill", r["rows"] >= 32)) and r["tokens"] >= 1   # noqa: E731
    pairs = [(a, b) for a, b in zip(rs, rs[1:]) if dec(a) and dec(b) and a["streams"] == 1]
    one = [r for r in rs if dec(r) and r["rows"] == 1]
    ms = lambda xs: round(_median(xs) * 1e3, 3)   # noqa: E731
    tok = sum(a["tokens"] for a, _ in pairs)
    wall = sum(b["start"] - a["start"] for a, b in pairs)
    step = sum(a["step1"] - a["step0"] for a, _ in pairs)
    return {
        "rounds": len(pairs), "tokens": tok, "rows": sum(a["rows"] for a, _ in pairs),
        "ms_a_token": round(wall / max(tok, 1) * 1e3, 3),
        "step_ms_a_token": round(step / max(tok, 1) * 1e3, 3),
        "outside_ms_a_token": round((wall - step) / max(tok, 1) * 1e3, 3),
        "one_row_step_ms": ms([r["step1"] - r["step0"] for r in one]),
        "one_row_rounds": len(one),
        "period_ms": ms([b["start"] - a["start"] for a, b in pairs]),
        "outside_ms": ms([(b["start"] - a["start"]) - (a["step1"] - a["step0"]) for a, b in pairs]),
        "build_ms": ms([a["build"] for a, _ in pairs]),
        "take_ms": ms([a["take"] for a, _ in pairs]),
        "emit_ms": ms([a["emit"] for a, _ in pairs]),
        "round_rest_ms": ms([(a["end"] - a["start"]) - (a["step1"] - a["step0"]) - a["build"]
                             - a["take"] for a, _ in pairs]),
        "loop_ms": ms([b["start"] - a["end"] for a, b in pairs]),
        "cpu_ms_a_token": {k: round(v / tokens * 1e3, 3) for k, v in
                           sorted(d["threads"].items(), key=lambda kv: -kv[1]) if v > 0},
        "wall_s": round(d["wall"], 3),
    }


def serve_phase(a) -> dict:
    import httpx

    from bench.cpu_serve import ours as greedy_b1

    def ours(url, concurrency, requests, input_len, output_len, seed):
        """cpu_serve's b1 client (foldserve bench), with --sampling's fields where given."""
        if not a.sampling:
            return greedy_b1(url, concurrency, requests, input_len, output_len, seed)
        import asyncio

        from server.bench import add_arguments, bench
        p = argparse.ArgumentParser()
        add_arguments(p)
        extra = []
        for k, v in json.loads(a.sampling).items():
            extra += [f"--{k.replace('_', '-')}", str(v)]
        s = asyncio.run(bench(p.parse_args([
            "--url", url, "--concurrency", str(concurrency), "--requests", str(requests),
            "--input-len", str(input_len), "--output-len", str(output_len), "--seed", str(seed),
            "--endpoint", "/v1/completions", *extra])))
        if s["failed"]:
            raise RuntimeError(f"bench: {s['failed']} failed: {s['errors']}")
        return s
    dump = f"/tmp/serve_trace.{os.getpid()}.json"
    env = dict(os.environ, NUMBA_NUM_THREADS=str(a.threads), PYTHONPATH=TREE,
               SERVE_TRACE_TREE=TREE)
    if a.model_file:
        env["FOLDSERVE_MODEL"] = a.model_file
    cmd = [sys.executable, os.path.abspath(__file__), "--child", dump, "--", "serve", "--host",
           "127.0.0.1", "--port", str(a.port)]
    if a.stub_ms is not None:
        from server.engine.locate import resolve
        cmd[5:] = ["stub", str(a.port), str(a.stub_ms), str(a.model_file or resolve(None))]
    proc = subprocess.Popen(cmd, cwd=TREE, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{a.port}"
    t0 = time.perf_counter()
    try:
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited {proc.returncode}: {proc.stderr.read()[-3000:]}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.perf_counter() - t0 > 600:
                raise RuntimeError("not healthy in 600 s")
            time.sleep(0.2)
        ours(url, 1, 1, 16, 8, 99)                      # warm

        def window(fn, tag):
            if os.path.exists(dump):
                os.remove(dump)
            import resource
            proc.send_signal(signal.SIGUSR1)
            time.sleep(0.05)
            ru = resource.getrusage(resource.RUSAGE_SELF)
            r = fn()
            ru1 = resource.getrusage(resource.RUSAGE_SELF)
            client_cpu[tag] = ru1.ru_utime + ru1.ru_stime - ru.ru_utime - ru.ru_stime
            time.sleep(0.05)
            proc.send_signal(signal.SIGUSR1)
            for _ in range(100):
                if os.path.exists(dump) and os.path.getsize(dump):
                    break
                time.sleep(0.05)
            time.sleep(0.1)
            for kind in ("", ".loop", ".engine"):          # SERVE_TRACE_PROFILE's files, by window
                if os.path.exists(f"{dump}{kind}.prof"):
                    os.replace(f"{dump}{kind}.prof", f"/tmp/serve_trace.{tag}{kind}.prof")
            with open(dump) as f:
                return r, json.load(f)

        res, client_cpu = {}, {}
        s, d = window(lambda: ours(url, 1, a.requests, a.input_len, a.output_len, 300), "stream")
        res["stream"] = {"client_tpot_ms": round(s["tpot_ms"]["median"], 3),
                         "client_cpu_ms_a_token": round(client_cpu["stream"] * 1e3
                                                       / (a.requests * a.output_len), 3),
                         **analyse(d, a.requests * a.output_len)}
        if a.raw:
            res["stream"]["raw"] = d["rounds"]
        from server.bench import prompts
        ps = prompts(a.requests, a.input_len, 400)
        model = httpx.get(f"{url}/v1/models").json()["data"][0]["id"]

        def plain():
            out = []
            with httpx.Client(timeout=600) as c:
                for p in ps:
                    for n in (1, a.output_len):
                        t = time.perf_counter()
                        r = c.post(f"{url}/v1/completions", json={
                            "model": model, "prompt": p, "max_tokens": n, "ignore_eos": True,
                            "temperature": 0, **json.loads(a.sampling or "{}")})
                        r.raise_for_status()
                        out.append((n, time.perf_counter() - t))
            return out
        # prompts: the 1-token request first puts the prompt in the cache; the long one then
        # resumes, so its e2e - the first's is the decode of output_len - 1 tokens + 1 prefill
        # of the last part page; the rounds' own medians below are the cleaner numbers
        r, d = window(plain, "plain")
        e1 = [t for n, t in r if n == 1]
        en = [t for n, t in r if n != 1]
        res["plain"] = {"client_tpot_ms": round(_median([(y - x) / (a.output_len - 1)
                                                         for x, y in zip(e1, en)]) * 1e3, 3),
                        "client_cpu_ms_a_token": round(client_cpu["plain"] * 1e3
                                                      / (a.requests * (a.output_len + 1)), 3),
                        **analyse(d, a.requests * (a.output_len + 1))}
        if a.raw:
            res["plain"]["raw"] = d["rounds"]
        return res
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        if os.path.exists(dump):
            os.remove(dump)


def engine_phase(a) -> dict:
    """The engine alone, as the server opens it (server.engine.locate / weights.load)."""
    import numba
    import numpy as np

    import kernels
    kernels.init()
    from server.engine.engine import Engine
    from server.engine.locate import resolve
    from server.engine.weights import load
    from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep
    numba.set_num_threads(a.threads)
    ld = load(str(a.model_file or resolve(None)), progress=False)
    eng = Engine(ld.spec, ld.tensors.__getitem__)
    ctx = 1024
    eng.apply(PoolStep(True, ctx // 16, 16, (eng.page_bytes(16),), 1, ctx))
    rng = np.random.default_rng(7)
    means = []
    for rep in range(a.requests + 1):             # the first: warm (compile / cache read)
        eng.apply(BeginStep(0, tuple(range(ctx // 16))))
        toks = tuple(int(t) for t in rng.integers(100, ld.spec.vocab - 100, a.input_len))
        lg = eng.apply(RoundStep((Chunk(0, 0, toks),)))
        nxt = int(np.argmax(lg[-1]))
        pos = a.input_len
        t = time.perf_counter()
        for _ in range(a.output_len - 1):
            lg = eng.apply(RoundStep((Chunk(0, pos, (nxt,)),)))
            nxt = int(np.argmax(lg, axis=1).tolist()[0])
            pos += 1
        dt = (time.perf_counter() - t) / (a.output_len - 1)
        eng.apply(EndStep(0))
        if rep:
            means.append(dt)
    return {"step_ms": round(_median(means) * 1e3, 3), "per_request_ms": [round(m * 1e3, 3)
                                                                          for m in means]}


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        return child(sys.argv[4:], sys.argv[2])
    if len(sys.argv) > 1 and sys.argv[1] == "--engine-child":
        sys.argv[1:2] = []
        print(json.dumps(engine_phase(_args())))
        return None
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model-file", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--port", type=int, default=8451)
    ap.add_argument("--phase", choices=("engine", "serve", "both"), default="both")
    ap.add_argument("--stub-ms", type=float, default=None, help="serve a stub engine that "
                    "sleeps this long a round (the host's cost alone; --model-file: the tokenizer)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--raw", action="store_true", help="keep every round's record in --out")
    ap.add_argument("--sampling", default=None, help='the requests\' sampling fields as JSON, '
                    'e.g. \'{"temperature": 0.7, "top_p": 0.95}\' (default: greedy)')
    a = ap.parse_args()
    res = {"model": a.model_file or "default", "threads": a.threads,
           "loadavg0": os.getloadavg()}
    if a.phase in ("engine", "both"):
        r = subprocess.run([sys.executable, os.path.abspath(__file__), "--engine-child",
                            *sys.argv[1:]],
                           cwd=TREE, env=dict(os.environ, NUMBA_NUM_THREADS=str(a.threads),
                                              PYTHONPATH=TREE, SERVE_TRACE_TREE=TREE),
                           capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(r.stderr[-3000:])
        res["engine"] = json.loads(r.stdout.strip().splitlines()[-1])
        print("engine", json.dumps(res["engine"]), flush=True)
    if a.phase in ("serve", "both"):
        res.update(serve_phase(a))
        for k in ("stream", "plain"):
            print(k, json.dumps({x: y for x, y in res[k].items() if x != "raw"}), flush=True)
    res["loadavg1"] = os.getloadavg()
    print(json.dumps({k: v for k, v in res.items() if k not in ("stream", "plain")}))
    if a.out:
        with open(a.out, "w") as f:
            json.dump(res, f)


def _args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model-file", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--requests", type=int, default=3)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--port", type=int, default=8451)
    ap.add_argument("--phase", default="both")
    ap.add_argument("--stub-ms", type=float, default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--raw", action="store_true")
    ap.add_argument("--sampling", default=None)
    return ap.parse_args()


if __name__ == "__main__":
    main()
