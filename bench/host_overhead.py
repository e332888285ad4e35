"""The server's host cost at many streams, without a model: the real HTTP front end,
scheduler, planner and admission, with an engine that answers a round after sleeping
`--device-ms` ("A": A ms a round; "A+Br": plus B ms a row, as prefill tokens cost; standing
in for the GPU, which runs while the host waits with the GIL released) and picks fixed greedy tokens. The bench client then runs the same workload as
the GPU speed runs. With --device-ms 0 a round costs only the host; against the device time
given, TPOT shows what the host adds to every decode round. CPU only.

  python3 bench/host_overhead.py --tokenizer M.gguf [--device-ms 0,10,10+0.046r] [--concurrency 64]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from server.shapes.spec import SHAPES  # noqa: E402
from server.ranks.steps import RoundStep  # noqa: E402


class StubLogits:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def argmax_rows(self):
        return [1000 + (7 * i) % 5000 for i in range(self.n)]


class StubEngine:
    """Engine.apply's shape: a round waits device_ms, then its wanted rows' logits."""
    device = "cpu"                              # rank 0 samples on the host
    def __init__(self, spec, device_ms: str):
        a, _, b = device_ms.partition("+")         # "A" or "A+Br": A ms a round, B ms a row
        self.spec, self.base, self.per_row = spec, float(a), float(b.rstrip("r") or 0)
        self.rounds, self.rows = 0, 0

    def page_bytes(self, page_rows):
        s = self.spec
        return s.n_layers * 2 * s.n_kv_heads * s.head_dim * 2 * page_rows

    def apply(self, step):
        if isinstance(step, RoundStep):
            self.rounds += 1
            rows = sum(len(c.tokens) for c in step.chunks)
            self.rows += rows
            ms = self.base + self.per_row * rows
            if ms:
                time.sleep(ms / 1e3)
            return StubLogits(sum(1 for c in step.chunks if c.logits))
        return None


def serve(a):
    from server.api.app import create_app
    from server.api.http_server import run_uvicorn
    from server.api.state import AppState
    from server.step_driver import LocalDriver
    from server.planner.admission import Admission
    from server.planner.layout import KV_BYTES, layouts
    from server.planner.plan import plan
    from server.scheduler import Scheduler
    from server.text.tokenizer import Tokenizer
    spec = SHAPES[a.shape]
    lays = layouts(spec, 1, KV_BYTES["cuda"], 16, 256)
    p = plan(lays, [40 << 30], a.context, a.concurrency, 0, "on", verify_window=1)
    eng = StubEngine(spec, a.device_ms)
    driver = LocalDriver(eng)
    driver.run(p.pool_step(False))
    sched = Scheduler(driver, Admission.from_plan(p, poison=False), context=a.context,
                      prefill_chunk=256, token_budget=2048).start()
    state = AppState(scheduler=sched, tokenizer=Tokenizer.from_gguf(a.tokenizer),
                     model_name="stub", context=a.context, max_queue=1024)
    run_uvicorn(create_app(state), "127.0.0.1", a.port, "warning")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", required=True, help="a GGUF whose tokenizer detokenizes")
    ap.add_argument("--device-ms", default="0,10")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--input-len", type=int, default=512)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--shape", default="llama3-8b")
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0)
    a = ap.parse_args()
    if a.serve:
        return serve(a)
    for ms in a.device_ms.split(","):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        srv = subprocess.Popen([sys.executable, __file__, "--serve", "--port", str(port),
                                "--device-ms", ms, "--tokenizer", a.tokenizer, "--shape", a.shape,
                                "--context", str(a.context), "--concurrency", str(a.concurrency)],
                               stderr=subprocess.DEVNULL)
        try:
            import httpx
            for _ in range(100):
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.2)
            cmd = [sys.executable, "-m", "server.cli", "bench", "--url", f"http://127.0.0.1:{port}",
                   "--concurrency", str(a.concurrency), "--requests", str(a.concurrency),
                   "--input-len", str(a.input_len), "--output-len", str(a.output_len), "--json"]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
            res = json.loads(r.stdout.strip().splitlines()[-1])
            print(f"device {ms} ms: {res['output_throughput']:.0f} tok/s, TPOT p50 "
                  f"{res['tpot_ms']['median']:.2f} ms (p99 {res['tpot_ms']['p99']:.2f}), TTFT p50 "
                  f"{res['ttft_ms']['median']:.0f} ms, {res['duration_s']:.2f} s, failed {res['failed']}",
                  flush=True)
        finally:
            srv.terminate()
            srv.wait(30)


if __name__ == "__main__":
    main()
