"""The server's TTFT on 512-token prompts (max_tokens 1), --prefill-chunk 256 and 512."""
import os, signal, subprocess, sys, time, httpx
sys.path.insert(0, ".")
from bench.cpu_serve import start_server
F = "/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"
import bench.cpu_serve as cs
orig = subprocess.Popen
for pc in sys.argv[1:]:
    extra = ["--prefill-chunk", pc]
    def popen(cmd, *a, **k):
        return orig(cmd + extra, *a, **k)
    cs.subprocess.Popen = popen
    proc, url, ready = start_server(8441, 2)
    cs.subprocess.Popen = orig
    try:
        import random
        for rep in range(3):
            ids = [random.Random(rep + 7).randrange(1000, 40000) for _ in range(512)]
            t = time.perf_counter()
            r = httpx.post(f"{url}/v1/completions", json={"prompt": ids, "max_tokens": 1, "temperature": 0}, timeout=600)
            dt = time.perf_counter() - t
            print(f"prefill-chunk {pc} rep {rep}: {dt:.2f} s ({512 / dt:.1f} tok/s) usage {r.json().get('usage')}", flush=True)
    finally:
        os.killpg(proc.pid, signal.SIGTERM); proc.wait(30)
