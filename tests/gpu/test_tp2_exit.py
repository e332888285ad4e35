"""Two GPU ranks over NCCL stop cleanly after serving.

A decode CUDA graph that captured an NCCL all-reduce holds a reference on the communicator,
and ncclCommDestroy waits until every such graph is destroyed. Before the engine dropped its
graphs at the StopStep, both ranks of a TP=2 server hung in the destroy after SIGTERM and had
to be killed (seen on two H200s: exits -9 and -15). Needs two GPUs; skipped otherwise."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]


def _gpus() -> int:
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def test_tp2_server_exits_cleanly_after_decode_graphs(tmp_path):
    if _gpus() < 2:
        pytest.skip("needs two GPUs")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tmp_path / "serve.log"
    env = {**os.environ, "NCCL_NVLS_ENABLE": "0", "TF_CUDA_GRAPHS": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "serve", "--tp", "2", "--device", "cuda",
         "--model", "dummy:smollm2-135m", "--port", str(port), "--context", "512",
         "--parallel", "4"], cwd=ROOT, env=env, stdout=open(log, "w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        t = time.time()
        while time.time() - t < 180:
            assert proc.poll() is None, log.read_text()[-2000:]
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(1)
        for n in (1, 2, 3):                      # decode rounds: graphs with all-reduces inside
            r = httpx.post(url + "/v1/completions", timeout=120, json={
                "prompt": [100 + n, 200, 300], "max_tokens": 8, "temperature": 0,
                "ignore_eos": True})
            assert r.status_code == 200, r.text
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = log.read_text(errors="replace")
    assert rc == 0, text[-2000:]
    assert "rank 0: " in text and "rank 1: " in text and "tables mapped" in text, text[-2000:]
    assert "did not close" not in text, text[-2000:]
