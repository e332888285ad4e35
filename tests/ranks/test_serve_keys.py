"""API keys with real `foldserve serve` processes (issue 30): a key given on the command
line reaches no follower (their argv, their environment); keys from FOLDSERVE_API_KEY and
--api-key-file are served; an empty key file stops rank 0 by name before the model loads."""
from __future__ import annotations

import signal

import httpx

from serve_procs import HOST, free_port, launched_ranks, wait_exit, wait_health

TINY = ["--model", "dummy:tiny", "--context", "512", "--join-timeout", "20"]


def models(url: str, key: str | None) -> int:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.get(url + "/v1/models", headers=headers, timeout=10).status_code


def test_a_key_on_the_command_line_reaches_no_follower(group):
    port = free_port()
    url = f"http://{HOST}:{port}"
    key = "cmdline-key-4f1e"
    server = group.start(["--tp", "2", "--port", str(port), "--api-key", key, *TINY],
                         env={"FOLDSERVE_API_KEY": "env-key-9a2c"}, name="rank0")
    wait_health(url, [server])
    (follower,) = launched_ranks(server.pid)
    argv = open(f"/proc/{follower}/cmdline", "rb").read().split(b"\0")
    environ = open(f"/proc/{follower}/environ", "rb").read().split(b"\0")
    assert key.encode() not in b" ".join(argv) and b"--api-key" not in argv, argv
    assert not [e for e in environ if e.startswith(b"FOLDSERVE_API_KEY=")]
    assert b"--rank" in argv                                # it is the follower
    assert models(url, None) == 401 and models(url, "wrong") == 401
    assert models(url, key) == 200 and models(url, "env-key-9a2c") == 200
    assert "--api-key is visible to every local user" in server.stderr
    server.popen.send_signal(signal.SIGTERM)
    assert wait_exit([server], 30) < 30


def test_keys_from_the_environment_and_a_key_file_are_served(group, tmp_path):
    keys = tmp_path / "keys"
    keys.write_text("\n  file-key-one  \n\nfile-key-two\n")
    keys.chmod(0o600)
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--port", str(port), "--api-key-file", str(keys), *TINY],
                         env={"FOLDSERVE_API_KEY": "env-key"}, name="rank0")
    wait_health(url, [server])
    assert models(url, None) == 401 and models(url, "file-key") == 401
    for key in ("file-key-one", "file-key-two", "env-key"):
        assert models(url, key) == 200, key
    assert httpx.get(url + "/health", timeout=10).status_code == 200    # probes need none
    assert "visible to every local user" not in server.stderr
    assert b"file-key-one" not in open(f"/proc/{server.pid}/cmdline", "rb").read()
    server.popen.send_signal(signal.SIGTERM)
    assert wait_exit([server], 30) < 30


def test_an_empty_key_file_stops_the_server_by_name(group, tmp_path):
    empty = tmp_path / "keys"
    empty.write_text("\n  \n")
    server = group.start(["--port", str(free_port()), "--api-key-file", str(empty), *TINY],
                         name="rank0")
    assert wait_exit([server], 60) < 60
    assert server.popen.returncode == 2
    assert f"foldserve: --api-key-file {empty}: it holds no key" in server.stderr
