"""Start, watch and stop a real foldserve server (a subprocess in its own process group)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from free_ports import free_port as _free_port

ROOT = Path(__file__).resolve().parents[2]
# a fresh clone compiles the CPU kernels before /health says ready (server/warmup.py):
# three servers at once on a small or busy host take minutes
START_TIMEOUT_S = 300.0

# name -> (TF_KV_PAGES, serve arguments)
CONFIGS = {
    "paged": ("on", ["--parallel", "16", "--context", "1024", "--prompt-cache-gib", "0.1"]),
    "windowed": ("off", ["--parallel", "8", "--context", "1024"]),
    "cold": ("on", ["--parallel", "2", "--context", "1024", "--prompt-cache-gib", "0"]),
}


def free_port() -> int:
    return _free_port("127.0.0.1")   # below the ephemeral range: tests/free_ports.py


@dataclass
class Server:
    name: str
    kv_pages: str
    args: list
    port: int = 0
    proc: subprocess.Popen | None = None
    log_path: Path | None = None
    model: str = ""
    _log: object = field(default=None, repr=False)
    preexec: object = field(default=None, repr=False)   # e.g. a lower open-file limit

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def launch(self) -> None:
        self.port = free_port()
        fd, path = tempfile.mkstemp(prefix=f"foldserve-e2e-{self.name}-", suffix=".log")
        self.log_path = Path(path)
        self._log = os.fdopen(fd, "w")
        env = {**os.environ, "TF_KV_PAGES": self.kv_pages, "PYTHONUNBUFFERED": "1"}
        cmd = [sys.executable, "-m", "server.cli", "serve", "--port", str(self.port),
               "--log-level", "warning", *self.args]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=self._log,
                                     stderr=subprocess.STDOUT, start_new_session=True,
                                     preexec_fn=self.preexec)

    def log_tail(self, n: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return "(no log)"

    def wait_ready(self, deadline: float) -> None:
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server {self.name} exited with {self.proc.returncode}:\n"
                                   f"{self.log_tail()}")
            try:
                r = httpx.get(self.url + "/health", timeout=2)
                if r.status_code == 200:
                    self.model = httpx.get(self.url + "/v1/models", timeout=5).json()["data"][0]["id"]
                    return
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"server {self.name} did not answer /health in "
                                   f"{START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)

    def alive(self) -> "Server":
        assert self.proc is not None and self.proc.poll() is None, \
            f"server {self.name} is gone (exit {self.proc.returncode}):\n{self.log_tail()}"
        return self

    def health(self) -> dict:
        r = httpx.get(self.url + "/health", timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def wait_idle(self, within_s: float = 3.0) -> dict:
        """/health once every stream is free and every page is free or kept by the cache."""
        deadline = time.monotonic() + within_s
        while True:
            h = self.health()
            if (h["streams_busy"] == 0 and h["queue"] == 0
                    and h["pages_free"] + h["pages_kept"] == h["pages_total"]):
                return h
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not idle {within_s} s later: {h}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
            except ProcessLookupError:
                pass
        if self._log:
            self._log.close()
        if self.log_path:
            self.log_path.unlink(missing_ok=True)


def start_all(configs: dict) -> dict:
    """Launch every server at once, then wait for each; on failure stop them all."""
    servers = {name: Server(name, kv, list(args)) for name, (kv, args) in configs.items()}
    try:
        for s in servers.values():
            s.launch()
        deadline = time.monotonic() + START_TIMEOUT_S
        for s in servers.values():
            s.wait_ready(deadline)
    except BaseException:
        for s in servers.values():
            s.stop()
        raise
    return servers
