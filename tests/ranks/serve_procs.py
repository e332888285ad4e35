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

    def serve_model(self, model, tp: int, *extra: str, timeout: float = 120.0) -> tuple[str, Proc]:
        """Rank 0 of `serve --model MODEL --tp TP --port <a free one> --context 256 EXTRA
        --join-timeout 30` (it launches its followers), waited for until /health answers,
        which must say tp TP; -> (its URL, the process)."""
        port = free_port()
        url = f"http://{HOST}:{port}"
        server = self.start(["--model", str(model), "--tp", str(tp), "--port", str(port),
                             "--context", "256", *extra, "--join-timeout", "30"], name="rank0")
        health = wait_health(url, [server], timeout=timeout)
        assert health["tp"] == tp, health
        return url, server

    def close(self) -> list[int]:
        """kill(), then remove the workdir: a test's teardown. Returns kill()'s live pids."""
        left = self.kill()
        shutil.rmtree(self.workdir, ignore_errors=True)
        return left

    def alive(self) -> list[int]:
        """Live (not zombie) processes in any of this group's process groups."""
        groups = {p.pid for p in self.procs}
        return processes(lambda state, ppid, pgid: pgid in groups and state != "Z")


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


def in_process_greedy(model, text: str, n: int):
    """The engine's own greedy continuation of text's ids (no BOS added, EOS ignored) in this
    process, the reference a served reply is held to: (n ids, the model's tokenizer)."""
    from server.engine.build import open_model
    from server.generate import generate
    from server.requests import SamplingParams
    opened = open_model(str(model), progress=False)
    ids = opened.tokenizer.encode(text, add_special_tokens=False)
    out = generate(opened, ids, SamplingParams(max_tokens=n, temperature=0.0, ignore_eos=True))
    return out, opened.tokenizer


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state, parent pid, process group) from /proc/<pid>/stat; None once it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return fields[0], int(fields[1]), int(fields[2])


def processes(where) -> list[int]:
    """Every process whose proc_stat fields (state, ppid, pgid) `where` accepts."""
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            st = proc_stat(int(d))
            if st is not None and where(*st):
                out.append(int(d))
    return out


def launched_ranks(pid: int) -> list[int]:
    """The children of pid that run `server.cli` (the ranks a serve process launched)."""
    out = []
    for c in processes(lambda state, ppid, pgid: ppid == pid):
        try:
            cmd = Path(f"/proc/{c}/cmdline").read_bytes()
        except OSError:
            continue
        if b"server.cli" in cmd:
            out.append(c)
    return out
