"""Real `foldserve serve` processes for the multi-rank acceptance tests.

Every process starts in a session of its own (start_new_session=True), so its process
group holds it and every rank it launched; teardown kills whole groups (os.killpg) and
then checks that nothing of them is left. Output goes to files, never to pipes a test
might forget to drain.
"""
from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from free_ports import free_port as _free_port

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parents[2]
REPORT = re.compile(r"rank (\d+): (\d+) tables mapped, digest ([0-9a-f]+), (\d+) open")
KV_STORE = re.compile(r"rank (\d+): KV store [\d.]+ MiB \((\w+), (\d+) pages of (\d+) rows")


def free_port() -> int:
    return _free_port(HOST)   # below the ephemeral range: tests/free_ports.py


def serving(port: int) -> bool:
    """Rank 0 serves on port: /health answers other than the 503 "loading" its claimed port
    gives before the model is up (server/api/http_socket.py)."""
    try:
        r = httpx.get(f"http://{HOST}:{port}/health", timeout=0.5)
    except httpx.HTTPError:
        return False
    return not (r.status_code == 503 and r.json().get("status") == "loading")


@dataclass
class Proc:
    """One `python3 -m server.cli serve ...` process (and whatever it launched)."""
    popen: subprocess.Popen
    out_path: Path
    err_path: Path
    name: str

    @property
    def pid(self) -> int:
        return self.popen.pid

    @property
    def stderr(self) -> str:
        return self.err_path.read_text(errors="replace")

    @property
    def output(self) -> str:
        return self.out_path.read_text(errors="replace") + self.stderr

    def reports(self) -> list[tuple]:
        """Table reports (rank, mapped, digest, open) this process logged."""
        return [(int(r), int(n), d, int(o)) for r, n, d, o in REPORT.findall(self.output)]


@dataclass
class Group:
    """Processes of one test; kill() ends every process group and checks none is left; close()
    kills and then removes the workdir (the processes' output files)."""
    workdir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="foldserve-ranks-")))
    procs: list = field(default_factory=list)

    def start(self, args: list[str], env: dict | None = None, name: str = "") -> Proc:
        """`python3 -m server.cli serve ARGS` with env added to this environment."""
        return self.start_cmd([sys.executable, "-m", "server.cli", "serve", *args], env, name)

    def start_cmd(self, cmd: list[str], env: dict | None = None, name: str = "") -> Proc:
        name = name or f"p{len(self.procs)}"
        out, err = self.workdir / f"{name}.out", self.workdir / f"{name}.err"
        full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"):
            if env is None or k not in env:
                full_env.pop(k, None)
        with open(out, "wb") as fo, open(err, "wb") as fe:
            popen = subprocess.Popen(cmd, cwd=REPO, env=full_env, stdout=fo, stderr=fe,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        p = Proc(popen, out, err, name)
        self.procs.append(p)
        return p

    def kill(self) -> list[int]:
        """SIGKILL every group; returns the pids still alive afterwards (should be none)."""
        for p in self.procs:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for p in self.procs:
            try:
                p.popen.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        deadline = time.monotonic() + 10
        left = self.alive()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = self.alive()
        return left

    def close(self) -> list[int]:
        """kill(), then remove the workdir: a test's teardown. Returns kill()'s live pids."""
        left = self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return left

    def alive(self) -> list[int]:
        """Live (not zombie) processes in any of this group's process groups."""
        groups = {p.pid for p in self.procs}
        left = []
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                stat = Path(f"/proc/{d}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2:].split()
            state, pgid = fields[0], int(fields[2])
            if pgid in groups and state != "Z":
                left.append(int(d))
        return left


def wait_health(url: str, procs: list, timeout: float = 90.0) -> dict:
    """Poll /health until it answers 200; fail early if a process exits."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if p.popen.poll() is not None:
                raise AssertionError(f"{p.name} exited with {p.popen.returncode} before serving:\n"
                                     f"{p.stderr[-3000:]}")
        try:
            r = httpx.get(url + "/health", timeout=2)
            if r.status_code == 200:
                return r.json()
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"no /health within {timeout} s:\n" +
                         "\n".join(f"--- {p.name}\n{p.stderr[-2000:]}" for p in procs))


def wait_exit(procs: list, timeout: float) -> float:
    """Wait until every process has exited; returns the seconds it took (timeout if not)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if all(p.popen.poll() is not None for p in procs):
            return time.monotonic() - t0
        time.sleep(0.05)
    return timeout


def rank_args(rank: int, world: int, master: str, *extra: str) -> list[str]:
    return ["--tp", str(world), "--rank", str(rank), "--master", master, *extra]
