"""Every command README.md and docs/operations.md show is accounted for here: run (those a
CPU runs in seconds, with what they print checked against the docs where the docs show
it), or named with the test that covers it or why it cannot run here. A command added to
the docs without an entry here fails `test_every_shown_command_is_accounted_for`."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent / "ranks"))
from serve_procs import HOST, Group, free_port, wait_health  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/operations.md")
COMMAND = re.compile(r"^((?:[A-Z_]+=\S+ )*(?:foldserve (?:serve|plan|generate|bench|check-pages)\b"
                     r"|deploy/|curl |make |sudo ).*)$")

RUN = "run below"
COVERED = {
    "make serve": "how a fresh clone starts; its parts: tests/ranks/test_deploy.py",
    "make test": "how this suite runs",
    "make install": "make serve's first half; the .venv it makes: tests/ranks/test_deploy.py",
    "foldserve serve --help": RUN,
    "curl -s 127.0.0.1:8000/v1/chat/completions": "tests/ranks/test_deploy.py (a chat request)",
    "foldserve serve --tp 2": "tests/ranks/test_serve_ranks.py::test_golden_at_tp",
    "--device cuda": "needs a GPU",
    "foldserve serve --tp N": "a template (N, R, HOST:PORT); tests/ranks/test_serve_ranks.py",
    "foldserve generate \"The capital of France is\"": RUN,
    "foldserve plan --model dummy:llama3-8b --tp 3 --context 131072 --room 40": RUN,
    "foldserve check-pages": "tests/model/test_check_pages.py (the same check, planted faults too)",
    "foldserve bench --url http://127.0.0.1:8000": "tests/e2e/test_bench.py",
    "deploy/one-host.sh 2 --device cpu": "tests/ranks/test_deploy.py::test_one_host_tp2_on_cpu_answers_a_chat_request_beside_a_server_on_its_port",
    "deploy/one-host.sh 3 --device cpu --model dummy:tiny": RUN,
    "deploy/rank.sh 0 2 10.0.0.1:29551": RUN,
    "deploy/rank.sh 1 2 10.0.0.1:29551": RUN,
    "deploy/rank.sh R 2 10.0.0.1:29551": "a template; deploy/gb10-tp2.env's: tests/ranks/test_deploy.py",
    "TF_KV_PAGES=on deploy/rank.sh": "tests/ranks/test_deploy.py::test_the_callers_environment_wins_over_the_env_file",
    "sudo make install-system": "changes the host; its steps: tests/ranks/test_deploy.py (dry run)",
    "sudo systemctl": "needs systemd running; the unit: tests/ranks/test_deploy.py::test_the_unit_verifies",
    "TF_ROOM_GIB=0.00": RUN,
    "foldserve plan --model dummy:tiny --tp 3 --context 512 --prompt-cache-gib 0": RUN,
    "curl -s localhost:8000/health": RUN,
}


def shown_commands() -> list[str]:
    out = []
    for name in DOCS:
        fenced = False
        for line in (REPO / name).read_text().splitlines():
            if line.startswith("```"):
                fenced = not fenced
                continue
            texts = [t for t in re.findall(r"`([^`]+)`", line)      # inline: not bare names
                     if len(t.split()) >= 2 and t not in ("foldserve serve", "foldserve plan")]
            if fenced or line.startswith("    "):
                texts.append(re.sub(r"^\s*(?:\$ )?(?:host \w+(?: \([^)]*\))?:\s+)?", "", line))
            out += [t.strip() for t in texts if COMMAND.match(t.strip())]
    return out


def _entry(cmd: str) -> str | None:
    return next((k for k in COVERED if k in cmd), None)


def test_every_shown_command_is_accounted_for():
    shown = shown_commands()
    assert len(shown) > 15
    missing = [c for c in shown if _entry(c) is None]
    assert not missing, f"commands in the docs with no entry in {__file__}: {missing}"
    unused = [k for k in COVERED if not any(k in c for c in shown)]
    assert not unused, f"entries no doc shows any more: {unused}"


def _env(**more) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TF_ROOM_GIB")}
    return {**env, **more}


def foldserve(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "server.cli", *args], cwd=REPO,
                          capture_output=True, text=True, env=env or _env(), timeout=120)


def _doc_block(name: str, start: str) -> list[str]:
    """The indented lines of the block in docs that holds `start`, unindented."""
    lines = (REPO / name).read_text().splitlines()
    i = next(i for i, l in enumerate(lines) if l.strip().startswith(start))
    while i > 0 and lines[i - 1].startswith("    "):
        i -= 1
    block = []
    while i < len(lines) and lines[i].startswith("    "):
        block.append(lines[i][4:])
        i += 1
    return block


def test_serve_help_shows_every_default():
    r = foldserve("serve", "--help")
    assert r.returncode == 0 and "(default: 8000)" in r.stdout and "--stats-interval" in r.stdout


def test_readme_plan_command():
    r = foldserve("plan", "--model", "dummy:llama3-8b", "--tp", "3", "--context", "131072", "--room", "40")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("4 streams at once") and "rank 0 of 3 governs" in r.stdout


def test_readme_generate_and_its_json(real_model_path):
    # one load of the real model (the plain form prints the same reply as it comes)
    r = foldserve("generate", "--json", "--max-tokens", "4", "The capital of France is")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 1, "README: --json prints one JSON object, nothing streamed before it"
    reply = json.loads(lines[0])
    assert set(reply) == {"prompt_ids", "ids", "text"} and len(reply["ids"]) == 4


def test_operations_startup_block_plan_and_health_as_shown():
    """The three TF_ROOM_GIB ranks print the block the page shows; `foldserve plan` prints
    its plan line; /health answers the JSON shown (the page's port and master are
    replaced by free ones)."""
    block = _doc_block("docs/operations.md", "TF_ROOM_GIB=0.003 foldserve serve")
    starts = [l for l in block if l.startswith("TF_ROOM_GIB=")]
    printed = _doc_block("docs/operations.md", "foldserve 0.1.0: the pool is planned")
    port, master = free_port(), f"{HOST}:{free_port()}"
    g = Group()
    try:
        procs = []
        for line in starts:
            var, _, rest = line.partition(" ")
            argv = rest.split()[2:]          # after `foldserve serve`
            argv = [master if a == "127.0.0.1:29551" else a for a in argv]
            procs.append(g.start([*argv, "--port", str(port)], env={var.split("=")[0]: var.split("=")[1]},
                                 name=f"rank{len(procs)}"))
        url = f"http://{HOST}:{port}"
        health = wait_health(url, procs)
        err = procs[0].stderr
        start = err.index("foldserve 0.1.0: the pool is planned")
        got = err[start:].splitlines()[:11]
        want = [l for l in printed if not re.match(r"\d{4}-\d\d-\d\d ", l)]   # log lines
        norm = lambda l: re.sub(r"loaded in [\d.]+ s", "loaded in N s", l).replace(
            "127.0.0.1:8000", f"127.0.0.1:{port}")
        assert [norm(l) for l in got] == [norm(l) for l in want]
        # before the block: the warm-up, in log lines with their time
        assert re.search(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} warm in [\d.]+ s: the CPU "
                         r"kernels are ready", err[:start], re.M), err[:start]
        shown = " ".join(_doc_block("docs/operations.md", "$ curl -s localhost:8000/health")[1:])
        assert health == json.loads(shown)
        plan_cmd = next(l for l in _doc_block("docs/operations.md", "foldserve plan --model dummy:tiny"))
        r = foldserve(*plan_cmd.split()[1:])
        assert r.returncode == 0, r.stderr
        assert f"  plan          {r.stdout.strip()}" in printed
    finally:
        g.close()


def test_operations_one_host_try_and_rank_commands():
    port = free_port()
    g = Group()
    try:
        proc = g.start_cmd(["bash", str(REPO / "deploy/one-host.sh"), "3", "--device", "cpu",
                            "--model", "dummy:tiny", "--port", str(port)],
                           env={"PYTHON": sys.executable, "FOLDSERVE_ENV": str(REPO / "deploy/foldserve.env")},
                           name="one-host")
        health = wait_health(f"http://{HOST}:{port}", [proc])
        assert health["tp"] == 3 and health["model"] == "dummy:tiny"
        r = subprocess.run(["curl", "-s", f"localhost:{port}/health"], capture_output=True, text=True)
        if r.returncode != 127:
            assert json.loads(r.stdout)["status"] == "ok"
    finally:
        g.close()
    env = _env(FOLDSERVE_DRY_RUN="1", PYTHON=sys.executable, FOLDSERVE_API_KEY="k-in-env")
    for args in (["0", "2", "10.0.0.1:29551", "--host", "0.0.0.0"],
                 ["1", "2", "10.0.0.1:29551"]):
        r = subprocess.run(["bash", str(REPO / "deploy/rank.sh"), *args], capture_output=True,
                           text=True, env=env)
        assert r.returncode == 0, r.stderr
        assert f"serve --tp 2 --rank {args[0]} --master 10.0.0.1:29551" in r.stdout
        assert "k-in-env" not in r.stdout + r.stderr     # the key is in no command line


@pytest.fixture
def real_model_path():
    from server.engine.locate import ModelNotFound, resolve
    try:
        return resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))
