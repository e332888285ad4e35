"""Issue 30, items 8, 9 and the text/plain note, against a real `foldserve serve` (dummy:tiny,
CPU, TP=2): which processes show the key in ps, what a text/plain body and a 200 KB header
line get. Usage: python repro.py (from the checkout; PYTHONPATH=.)"""
import os, signal, socket, subprocess, sys, time, json
import httpx

SECRET = "sk-repro-" + "7" * 8
def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def start(extra, env=None):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "server.cli", "serve", "--tp", "2", "--model", "dummy:tiny",
                          "--context", "512", "--port", str(port), *extra], env={**os.environ, **(env or {})},
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True, text=True)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        if p.poll() is not None:
            return p, url, False
        try:
            r = httpx.get(url + "/health", timeout=1)
            if r.status_code == 200: return p, url, True
        except httpx.HTTPError: pass
        time.sleep(0.1)
    return p, url, False

def stop(p):
    os.killpg(p.pid, signal.SIGTERM)
    try: _, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired: os.killpg(p.pid, signal.SIGKILL); _, err = p.communicate()
    return err

def ps_with(secret):
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [l.strip()[:160] for l in out.splitlines() if secret in l and "ps -eo" not in l]

def big_header(url):
    host, port = url.split("//")[1].split(":")
    req = b"GET /v1/models HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 200_000 + b"\r\n\r\n"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        try: s.sendall(req)
        except OSError as e: return f"send: {e!r}"
        out = b""
        try:
            while c := s.recv(65536): out += c
        except OSError as e:
            return f"recv: {e!r} after {len(out)} bytes ({out[:40]!r})"
        return out.split(b"\r\n")[0].decode() + " | " + out.partition(b"\r\n\r\n")[2].decode()[:200]

print("# 1. --api-key on the command line, TP=2")
p, url, ok = start(["--api-key", SECRET])
print("serving:", ok)
print("processes whose argv (ps -eo pid,args) shows the key:", len(ps_with(SECRET)))
for l in ps_with(SECRET): print("   ", l)
auth = {"Authorization": f"Bearer {SECRET}"}
body = json.dumps({"prompt": [5, 6, 7], "max_tokens": 2, "temperature": 0})
for ct in ("text/plain", "application/x-www-form-urlencoded", None, "application/json"):
    h = dict(auth)
    if ct: h["content-type"] = ct
    r = httpx.post(url + "/v1/completions", content=body, headers=h, timeout=30)
    print(f"POST /v1/completions Content-Type {ct}: {r.status_code} {r.text[:150]}")
print("200 KB header line:", big_header(url))
err = stop(p)
print("rank 0's stderr lines with 'api-key':", [l for l in err.splitlines() if "api-key" in l.lower()])

print("\n# 2. FOLDSERVE_API_KEY in the environment, TP=2")
p, url, ok = start([], env={"FOLDSERVE_API_KEY": SECRET})
print("serving:", ok, "| processes whose argv shows the key:", len(ps_with(SECRET)))
if ok:
    print("GET /v1/models without a bearer:", httpx.get(url + "/v1/models", timeout=10).status_code,
          "| with it:", httpx.get(url + "/v1/models", headers=auth, timeout=10).status_code)
stop(p)
