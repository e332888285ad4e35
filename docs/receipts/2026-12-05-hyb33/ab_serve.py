"""b1 through the server: trees A and B (each a fresh server) and llama-bench tg64, alternated by round."""
import json, os, signal, subprocess, sys, time
import httpx
sys.path.insert(0, "/work/wt/hyb33")
from bench.cpu_serve import ours
from bench.cpu_decode import llama_bench
F = "/tmp/peers-bench/qwen3.5-35b-a3b-L4-Q8_0.gguf"
LB = "/work/peers-build/llama.cpp/build-cpu/bin/llama-bench"
trees = dict(t.split("=") for t in sys.argv[2:])
rounds = int(sys.argv[1])
def start(tree, port):
    env = dict(os.environ, NUMBA_NUM_THREADS="2", PYTHONPATH=tree, FOLDSERVE_MODEL=F)
    p = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--host", "127.0.0.1", "--port", str(port)],
                         cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    t0 = time.time()
    while True:
        if p.poll() is not None: raise RuntimeError(p.stderr.read()[-2000:])
        try:
            if httpx.get(url + "/health", timeout=2).status_code == 200: return p, url
        except httpx.HTTPError: pass
        if time.time() - t0 > 300: raise RuntimeError("not healthy")
        time.sleep(0.2)
res = []
for r in range(rounds):
    row = {"round": r, "load0": os.getloadavg()[0]}
    order = list(trees) if r % 2 == 0 else list(reversed(trees))
    for name in order:
        p, url = start(trees[name], 8461)
        try:
            ours(url, 1, 1, 16, 8, 99)
            s = ours(url, 1, 3, 64, 64, 100 + 10 * r)
            row[name] = 1000 / s["tpot_ms"]["median"]
        finally:
            os.killpg(p.pid, signal.SIGTERM); p.wait(30)
    lb = llama_bench(LB, F, 2, 64, 0)
    row["llama_tg"] = lb.get("tg")
    row["load1"] = os.getloadavg()[0]
    for name in trees: row[f"{name}/llama"] = row[name] / row["llama_tg"]
    print(json.dumps(row), flush=True)
    res.append(row)
import statistics
for k in res[0]:
    if k not in ("round",):
        print(k, "median", statistics.median(r[k] for r in res))
