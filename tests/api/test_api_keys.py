"""API keys off the command line (issue 30): FOLDSERVE_API_KEY and --api-key-file (one key a
line, several allowed) beside --api-key (kept, with a warning: ps shows it to every local
user); every key checked in the same time whichever matched; the followers rank 0 launches
get neither the flags nor the variable."""
from __future__ import annotations

import os

import pytest
from fastapi.testclient import TestClient

from api_fakes import FakeScheduler, make_state
from server.api import auth, create_app
from server.api.keys import gather_keys
from server.config import ConfigError
from server.serve import follower_argv, follower_env


def write(tmp_path, text: str | bytes, mode: int = 0o600):
    p = tmp_path / "keys"
    p.write_bytes(text if isinstance(text, bytes) else text.encode())
    os.chmod(p, mode)
    return str(p)


def test_a_key_file_holds_a_key_a_line(tmp_path):
    path = write(tmp_path, "  first-key  \n\n\t\nsecond-key\r\n   \nthird key with spaces\n")
    got = gather_keys(key_file=path)
    assert got.keys == ("first-key", "second-key", "third key with spaces")
    assert got.warnings == () and got.sources == (f"--api-key-file {path}",)


@pytest.mark.parametrize("text", ["", "\n\n", "  \t \r\n \n"])
def test_an_empty_key_file_is_refused_by_name(tmp_path, text):
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=f"--api-key-file {path}: it holds no key"):
        gather_keys(key_file=path)


def test_a_missing_key_file_is_refused_by_name(tmp_path):
    with pytest.raises(ConfigError, match=f"--api-key-file {tmp_path}/nope: cannot read it"):
        gather_keys(key_file=str(tmp_path / "nope"))


def test_a_key_with_a_character_no_header_carries_is_refused_without_showing_it(tmp_path):
    path = write(tmp_path, "good\n\ufeffsecret-with-a-bom\n")
    with pytest.raises(ConfigError) as e:
        gather_keys(key_file=path)
    assert "line 2" in str(e.value) and "U+FEFF" in str(e.value)
    assert "secret" not in str(e.value)
    with pytest.raises(ConfigError, match="FOLDSERVE_API_KEY.*U\\+0007"):
        gather_keys(env_key="bell\x07")


def test_a_key_file_others_can_read_is_served_with_a_warning(tmp_path):
    path = write(tmp_path, "k\n", mode=0o644)
    got = gather_keys(key_file=path)
    assert got.keys == ("k",)
    (warning,) = got.warnings
    assert path in warning and "0644" in warning and "chmod 600" in warning


def test_the_environment_variable(tmp_path):
    got = gather_keys(env_key="  from-env \n")
    assert got.keys == ("from-env",) and got.sources == ("FOLDSERVE_API_KEY",)
    assert got.warnings == ()
    for empty in ("", "  "):
        with pytest.raises(ConfigError, match="FOLDSERVE_API_KEY is set but holds no key"):
            gather_keys(env_key=empty)


def test_the_flag_still_works_with_a_warning():
    got = gather_keys(flag_key="on-the-command-line")
    assert got.keys == ("on-the-command-line",)
    (warning,) = got.warnings
    assert "ps" in warning and "FOLDSERVE_API_KEY" in warning and "--api-key-file" in warning
    with pytest.raises(ConfigError, match="--api-key is empty"):
        gather_keys(flag_key="")          # `--api-key "$KEY"` with KEY unset: not open


def test_every_source_adds_its_keys(tmp_path):
    path = write(tmp_path, "b\nc\nb\n")
    got = gather_keys(flag_key="a", key_file=path, env_key="c")
    assert got.keys == ("b", "c", "a")                     # the file's, the variable's, the flag's
    assert got.sources == (f"--api-key-file {path}", "FOLDSERVE_API_KEY", "--api-key")
    assert gather_keys().keys == ()


def test_any_of_several_keys_is_served():
    with TestClient(create_app(make_state(FakeScheduler(), api_keys=("one", "two", "three")))) as c:
        for key in ("one", "two", "three"):
            r = c.get("/v1/models", headers={"Authorization": f"Bearer {key}"})
            assert r.status_code == 200, key
        for bad in ("Bearer four", "Bearer one two", "Bearer ", "Basic one", "one"):
            r = c.get("/v1/models", headers={"Authorization": bad})
            assert r.status_code == 401 and r.json()["error"]["code"] == "invalid_api_key", bad
        assert c.get("/v1/models").status_code == 401


def test_every_key_is_compared_whichever_matched(monkeypatch):
    """No early exit on the first match: a request costs one comparison a key, of equal-length
    digests, so its time says nothing about which key (or how much of one) it held."""
    calls = []
    real = auth.hmac.compare_digest

    def counting(a, b):
        calls.append((len(a), len(b)))
        return real(a, b)

    monkeypatch.setattr(auth.hmac, "compare_digest", counting)
    keys = ("k-one", "a-much-longer-second-key", "3")
    with TestClient(create_app(make_state(FakeScheduler(), api_keys=keys))) as c:
        for given in (*keys, "wrong", "k-on", "x" * 1000):
            calls.clear()
            c.get("/v1/models", headers={"Authorization": f"Bearer {given}"})
            assert len(calls) == len(keys), given
            assert {a for a, b in calls} == {b for a, b in calls} == {32}, given


@pytest.mark.parametrize("secret", [
    ["--api-key", "K"], ["--api-key=K"], ["--api-key-file", "/etc/k"], ["--api-key-file=/etc/k"],
    ["--api-key-f", "/etc/k"], ["--api-key-fi=/etc/k"]])
def test_the_followers_argv_holds_no_key(secret):
    argv = ["serve", "--model", "dummy:tiny", *secret, "--context", "512"]
    out = follower_argv(argv, rank=1, world=2, master="127.0.0.1:5000")
    assert out == ["serve", "--model", "dummy:tiny", "--context", "512", "--rank", "1",
                   "--master", "127.0.0.1:5000", "--tp", "2"]
    assert not any("K" == a or "/etc/k" in a or a.startswith("--api") for a in out)


def test_the_followers_argv_keeps_everything_else():
    argv = ["serve", "--tp", "3", "--served-model-name", "api-key", "--host", "0.0.0.0"]
    assert follower_argv(argv, rank=2, world=3, master="h:1") == [*argv, "--rank", "2",
                                                                  "--master", "h:1"]


def test_the_followers_environment_holds_no_key():
    env = {"PATH": "/bin", "FOLDSERVE_API_KEY": "K", "TF_KV_PAGES": "on"}
    assert follower_env(env) == {"PATH": "/bin", "TF_KV_PAGES": "on"}
    assert env["FOLDSERVE_API_KEY"] == "K"          # rank 0's own is left as it was
