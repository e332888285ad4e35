"""Issue 4's acceptance on the CPU with real processes: `foldserve serve` at TP 2 and 3.

  golden    TP=2 and TP=3 greedy continuations equal the golden greedy ids (golden rule)
  refuse    ranks that differ in TF_KV_PAGES, page rows, --context or model each stop,
            naming the field and the rank, within 30 s; rank 0 never serves (its port
            answers 503 loading until it stops)
  rooms     ranks capped 3:2:4 make one pool sized by the 2; after a mixed run every
            rank's tables equal rank 0's and every pool is free
  lost      a follower killed mid-request or while idle: the request ends with a 503,
            /health turns unhealthy, rank 0 keeps answering
  frozen    a SIGSTOPped follower, idle or busy: /health 503 and the request's rank_lost
            error within 6 s (the heartbeat, --peer-timeout 5); SIGCONT brings nothing
            back (the follower stops, rank 0 stays unhealthy and exits 1); a step longer
            than the peer timeout trips nothing; a launched follower that dies is reaped

Every server runs in process groups of its own, killed at teardown; a test fails if any
process of them is left behind.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import httpx
import pytest

from serve_procs import (HOST, KV_STORE, REPO, free_port, launched_ranks, serving, rank_args,
                         wait_exit, wait_health)

TINY = ["--model", "dummy:tiny", "--context", "512", "--join-timeout", "20"]


@pytest.fixture(scope="session")
def real_model_path():
    from server.engine.locate import ModelNotFound, resolve
    try:
        path = resolve(None)
    except ModelNotFound as e:
        pytest.skip(str(e))
    if not os.path.isfile(path):
        pytest.skip(f"model file absent: {path}")
    return path


def completion(url: str, **body) -> httpx.Response:
    return httpx.post(url + "/v1/completions", json=body, timeout=120)


# ---- golden: TP=2 and TP=3 equal the reference's greedy ids ---------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("tp", [2, 3])
def test_golden_at_tp(tp, golden, real_model_path, group):
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--tp", str(tp), "--port", str(port), "--context", "512",
                          "--parallel", "8", "--prompt-cache-gib", "0"], name="rank0")
    health = wait_health(url, [server], timeout=300)    # the warm-up compiles first
    assert health["tp"] == tp and health["ranks"] == tp

    cases = golden["cases"]
    results = {}

    def ask(case):       # all cases at once: continuous batching must not change a token
        n = case["exact_prefix"]
        results[case["name"]] = completion(url, prompt=case["prompt_ids"], max_tokens=n,
                                           temperature=0, ignore_eos=True, logprobs=0,
                                           skip_special_tokens=False)   # the golden ids' text, specials too

    threads = [threading.Thread(target=ask, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    for case in cases:
        n = case["exact_prefix"]
        want_ids = case["greedy_ids"][:n]
        r = results[case["name"]]
        assert r.status_code == 200, r.text
        choice = r.json()["choices"][0]
        # the API returns each token's text; the golden ids decoded by the same server
        want_text = httpx.post(url + "/detokenize", json={"tokens": want_ids}).json()["prompt"]
        want_tokens = [httpx.post(url + "/detokenize", json={"tokens": [i]}).json()["prompt"]
                       for i in want_ids]
        assert choice["logprobs"]["tokens"] == want_tokens, (tp, case["name"])
        assert choice["text"] == want_text, (tp, case["name"])
        assert choice["finish_reason"] == "length"


# ---- refuse: a differing fingerprint field stops every rank -----------------------------------

REFUSALS = {
    "kv_pages": (2, {0: ([], {"TF_KV_PAGES": "on"}), 1: ([], {"TF_KV_PAGES": "off"})},
                 "ranks disagree on TF_KV_PAGES: rank 0 resolved on, rank 1 resolved off; "
                 "set it the same on every host"),
    "page_rows": (2, {0: (["--page-rows", "16"], {}), 1: (["--page-rows", "32"], {})},
                  "ranks disagree on page rows: rank 0 has 16, rank 1 has 32; "
                  "start every rank with the same --page-rows"),
    "context": (3, {0: ([], {}), 1: ([], {}), 2: (["--context", "256"], {})},
                "ranks disagree on context: rank 0 has 512, rank 2 has 256; "
                "start every rank with the same --context"),
    "model": (2, {0: ([], {}), 1: (["--model", "dummy:tiny:1"], {})},
              "ranks disagree on model file: rank 0 has dummy:tiny, rank 1 has dummy:tiny:1; "
              "every rank must load the same model file"),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_differing_ranks_stop_naming_field_and_rank(case, group):
    world, per_rank, message = REFUSALS[case]
    master = f"{HOST}:{free_port()}"
    http = free_port()
    procs = []
    for r in range(world):
        extra, env = per_rank.get(r, ([], {}))
        procs.append(group.start(rank_args(r, world, master, *TINY, "--port", str(http), *extra),
                                 env=env, name=f"rank{r}"))
    t0 = time.monotonic()
    opened = False
    while time.monotonic() - t0 < 30 and any(p.popen.poll() is None for p in procs):
        opened = opened or serving(http)
        time.sleep(0.05)
    took = time.monotonic() - t0
    codes = [p.popen.poll() for p in procs]
    assert all(c is not None for c in codes), f"still running after 30 s: {codes}"
    assert all(c != 0 for c in codes), codes
    assert not opened, "rank 0 served although the ranks disagree"
    for p in procs:
        assert message in p.stderr, f"{p.name}:\n{p.stderr[-2000:]}"
        assert "serving" not in p.stderr
    if case == "model":                       # both values named, rank 1 named
        line = next(l for l in procs[0].stderr.splitlines() if "ranks disagree" in l)
        assert ", rank 1 has " in line and line.endswith("every rank must load the same model file")
    print(f"{case}: every rank stopped in {took:.1f} s: {procs[0].stderr.strip().splitlines()[-1]}")


# ---- rooms: one pool sized by the smallest room; equal tables; every pool free ---------------

def plan_pages(rooms: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "server.cli", "plan", "--model", "dummy:tiny",
                          "--tp", "3", "--context", "512", "--parallel", "4", "--device", "cpu",
                          "--room", rooms, "--json"], cwd=REPO, capture_output=True, text=True,
                         check=True, env={**os.environ, "TF_KV_PAGES": "on"})
    return json.loads(out.stdout)


def _mixed_request(url: str, i: int, kind: str, outcome: dict) -> None:
    prompt = [(7 * i + k) % 500 + 1 for k in range(3 + 11 * i)]     # 3 .. 124 tokens
    body = dict(prompt=prompt, max_tokens=20 + 30 * i, temperature=0 if i % 2 else 0.8,
                seed=i, ignore_eos=True)
    if kind == "plain":
        r = completion(url, **body)
        outcome[i] = (r.status_code, r.json()["choices"][0]["finish_reason"])
        return
    with httpx.stream("POST", url + "/v1/completions", json={**body, "stream": True},
                      timeout=60) as r:
        events = 0
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            if line == "data: [DONE]":
                outcome[i] = (r.status_code, "done")
                return
            events += 1
            if kind == "cancel" and events == 2:          # close the connection mid-stream
                outcome[i] = (r.status_code, "left")
                return


def test_rooms_of_3_2_and_4_gib_plan_one_pool_sized_by_the_2():
    """The issue's literal caps, on a shape whose room binds at whole GiB (SmolLM2's shape,
    context 8192, 32 streams, fp32 KV on CPU ranks): the 2 GiB rank governs every rank's pool."""
    def plan(rooms):
        out = subprocess.run([sys.executable, "-m", "server.cli", "plan", "--model",
                              "dummy:smollm2-135m", "--tp", "3", "--context", "8192", "--parallel",
                              "32", "--device", "cpu", "--room", rooms, "--json"], cwd=REPO,
                             capture_output=True, text=True, check=True,
                             env={**os.environ, "TF_KV_PAGES": "on"})
        return json.loads(out.stdout)
    mixed, two = plan("3,2,4"), plan("2")
    assert mixed["governing_rank"] == 1
    assert mixed["pages"] == two["pages"] < plan("3")["pages"]


def test_rooms_3_2_4_make_one_pool_and_equal_tables(group):
    # rooms in thousandths of a GiB: small enough that the room, not the streams, sizes the pool
    caps = ["0.003", "0.002", "0.004"]
    mixed, low = plan_pages(",".join(caps)), plan_pages("0.003")
    assert mixed["governing_rank"] == 1 and mixed["pool_pages"] < low["pool_pages"]

    master, port = f"{HOST}:{free_port()}", free_port()
    url = f"http://{HOST}:{port}"
    procs = [group.start(rank_args(r, 3, master, *TINY, "--port", str(port), "--parallel", "4",
                                   "--prompt-cache-gib", "0"),
                         env={"TF_ROOM_GIB": caps[r], "TF_KV_PAGES": "on"}, name=f"rank{r}")
             for r in range(3)]
    health = wait_health(url, procs)
    pages = health["pages_total"]
    assert pages == mixed["pool_pages"]
    assert f"taking {pages} pages" in procs[0].stderr and "rank 1 of 3 governs" in procs[0].stderr
    stores = [KV_STORE.search(p.stderr) for p in procs]
    assert [(int(m[1]), m[2], int(m[3])) for m in stores] == [(r, "pages", pages) for r in range(3)]

    kinds = ["plain", "stream", "cancel", "plain"] * 3          # 6 plain, 3 streamed, 3 cancelled
    outcome = {}
    threads = [threading.Thread(target=_mixed_request, args=(url, i, k, outcome))
               for i, k in enumerate(kinds)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert sorted(outcome) == list(range(12)), outcome
    for i, k in enumerate(kinds):
        want = {"plain": (200, "length"), "stream": (200, "done"), "cancel": (200, "left")}[k]
        assert outcome[i] == want, (i, k, outcome[i])

    deadline = time.monotonic() + 10            # cancellations land by the next round
    while True:
        h = httpx.get(url + "/health").json()
        if h["streams_busy"] == 0 and h["queue"] == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert h["status"] == "ok" and h["pages_free"] == h["pages_total"] == pages, h
    aborted = [l for l in httpx.get(url + "/metrics").text.splitlines()
               if l.startswith('foldserve:request_success_total{finished_reason="abort"')]
    assert len(aborted) == 1 and aborted[0].endswith(" 3.0"), aborted   # cut off mid-stream

    procs[0].popen.send_signal(signal.SIGTERM)   # rank 0 only: it sends every rank StopStep
    assert wait_exit(procs, 30) < 30
    assert [p.popen.returncode for p in procs] == [0, 0, 0], [p.stderr[-1500:] for p in procs]
    reports = [p.reports() for p in procs]
    assert all(len(rep) == 1 for rep in reports), reports
    (r0, mapped, digest, still_open), = reports[0]
    assert mapped == 12 + 1 and still_open == 0     # the 12 requests and the warm-up's (server/warmup.py)
    assert [rep[0] for rep in reports] == [(r, mapped, digest, 0) for r in range(3)]


# ---- lost: a follower killed mid-request or while idle --------------------------------------

def _start_pair(group, model="dummy:tiny", extra=()):
    master, port = f"{HOST}:{free_port()}", free_port()
    url = f"http://{HOST}:{port}"
    args = ["--model", model, "--context", "512", "--port", str(port), "--join-timeout", "20", *extra]
    procs = [group.start(rank_args(r, 2, master, *args), name=f"rank{r}") for r in range(2)]
    wait_health(url, procs)
    return url, procs


def _wait_busy(url: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while httpx.get(url + "/health").json()["streams_busy"] < 1:
        assert time.monotonic() < deadline, "the request never started"
        time.sleep(0.02)


def _assert_unhealthy_soon(url: str, procs, within: float) -> float:
    t0 = time.monotonic()
    while True:
        r = httpx.get(url + "/health", timeout=2)
        if r.status_code == 503:
            break
        assert time.monotonic() - t0 < within, f"/health still {r.status_code} after {within} s"
        time.sleep(0.1)
    took = time.monotonic() - t0
    body = r.json()
    assert body["status"] == "unhealthy" and "restart" in body["reason"]
    # the lost rank named, no pool of a group that has none (issue 30: pages_total 0 was seen)
    assert "rank 1 lost" in body["reason"] and body["pages_total"] is None, body
    assert procs[0].popen.poll() is None, "rank 0 exited instead of answering"
    # nothing hangs afterwards: a new request is refused at once with a 503
    t1 = time.monotonic()
    late = completion(url, prompt=[1, 2, 3], max_tokens=4)
    assert late.status_code == 503 and late.json()["error"]["type"] == "service_unavailable"
    assert time.monotonic() - t1 < 5
    return took


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_follower_killed_mid_request(stream, group):
    # the 135M shape with dummy weights: slow enough (about 0.1 s a token) to kill mid-request
    url, procs = _start_pair(group, "dummy:smollm2-135m")
    body = dict(prompt=[1, 2, 3, 4], max_tokens=300, temperature=0, ignore_eos=True)
    if not stream:
        got = {}
        t = threading.Thread(target=lambda: got.update(r=completion(url, **body)))
        t.start()
        _wait_busy(url)
        time.sleep(0.3)
        t0 = time.monotonic()
        os.kill(procs[1].pid, signal.SIGKILL)
        t.join(30)
        assert not t.is_alive(), "the request hangs after its follower died"
        took = time.monotonic() - t0
        r = got["r"]
        assert r.status_code == 503, r.text
        err = r.json()["error"]
        assert err["type"] == "service_unavailable" and "rank 1 lost" in err["message"]
        assert err["code"] == "rank_lost", err            # as docs/api.md says
    else:
        events = []
        with httpx.stream("POST", url + "/v1/completions", json={**body, "stream": True},
                          timeout=30) as r:
            for line in r.iter_lines():
                if not line.startswith("data: "):
                    continue
                events.append(line[6:])
                if len(events) == 2:
                    t0 = time.monotonic()
                    os.kill(procs[1].pid, signal.SIGKILL)
        took = time.monotonic() - t0
        assert events[-1] == "[DONE]"
        last = json.loads(events[-2])
        assert "error" in last and "rank 1 lost" in last["error"]["message"], events[-3:]
        assert last["error"]["code"] == "rank_lost", last
        assert all("choices" in json.loads(e) for e in events[:-2])
    assert took < 10, f"the request took {took:.1f} s to end after the follower died"
    _assert_unhealthy_soon(url, procs, within=5)
    assert "rank 1 lost" in procs[0].stderr
    assert "Traceback" not in procs[0].stderr, procs[0].stderr[-3000:]   # one line, not a trace
    print(f"request ended {took:.2f} s after the kill: {procs[0].stderr.count('rank 1 lost')}")


def test_follower_killed_while_idle_is_noticed(group):
    url, procs = _start_pair(group)
    assert httpx.get(url + "/health").status_code == 200
    os.kill(procs[1].pid, signal.SIGKILL)
    took = _assert_unhealthy_soon(url, procs, within=5)
    print(f"idle follower loss noticed in {took:.2f} s")


# ---- frozen: a SIGSTOPped follower, noticed by the heartbeat ---------------------------------

def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    return stat[stat.rindex(")") + 2] == "T"


@pytest.mark.parametrize("busy", [False, True], ids=["idle", "busy"])
def test_a_stopped_follower_is_lost_within_6_s(busy, group):
    url, procs = _start_pair(group, "dummy:smollm2-135m" if busy else "dummy:tiny")
    follower = procs[1]
    got = {}
    if busy:                               # about 0.1 s a token: mid-request for 30 s
        body = dict(prompt=[1, 2, 3, 4], max_tokens=300, temperature=0, ignore_eos=True)
        t = threading.Thread(target=lambda: got.update(r=completion(url, **body),
                                                        at=time.monotonic()))
        t.start()
        _wait_busy(url)
        time.sleep(0.3)
    t0 = time.monotonic()
    os.kill(follower.pid, signal.SIGSTOP)
    try:
        while not _stopped(follower.pid):
            time.sleep(0.01)
        polled = time.monotonic()
        took = polled - t0 + _assert_unhealthy_soon(url, procs, within=6 - (polled - t0))
        if busy:
            t.join(10)
            assert not t.is_alive(), "the request hangs on a stopped follower"
            r, ended = got["r"], got["at"] - t0
            assert ended < 6, f"the in-flight request ended {ended:.1f} s after the stop"
            assert r.status_code == 503, r.text
            err = r.json()["error"]
            assert err["code"] == "rank_lost" and err["type"] == "service_unavailable", err
            assert "rank 1 lost: no answer to the heartbeat for 5 s" in err["message"], err
        late = completion(url, prompt=[1, 2], max_tokens=2)
        assert late.json()["error"]["code"] == "rank_lost"
    finally:
        os.kill(follower.pid, signal.SIGCONT)
    # SIGCONT resurrects nothing: the follower reads rank 0's verdict and stops, in one line
    assert wait_exit([follower], 20) < 20, "the resumed follower runs on in a dead group"
    assert follower.popen.returncode not in (0, None)
    lines = follower.stderr.strip().splitlines()
    assert "Traceback" not in follower.stderr and lines[-1].startswith(
        "foldserve: rank 0 lost: it reported: rank 0 gave up on rank 1: no answer to the "
        "heartbeat"), follower.stderr[-2000:]
    assert httpx.get(url + "/health").status_code == 503
    assert completion(url, prompt=[1, 2], max_tokens=2).status_code == 503
    assert "Traceback" not in procs[0].stderr, procs[0].stderr[-3000:]
    procs[0].popen.send_signal(signal.SIGTERM)      # the group failed: rank 0 exits non-zero
    assert wait_exit(procs[:1], 30) < 30
    assert procs[0].popen.returncode == 1 and "exiting with status 1" in procs[0].stderr
    print(f"{'busy' if busy else 'idle'}: /health 503 {took:.2f} s "
          f"after the stop{f', request ended {ended:.2f} s after' if busy else ''}")


def test_a_stopped_rank_0_stops_its_follower_within_the_peer_timeout(group):
    """The heartbeat both ways: rank 0 SIGSTOPped, its follower hears no ping for
    --peer-timeout (5 s) and stops with one line, status 2 (it used to wait forever). Rank 0,
    resumed, finds the follower gone: /health 503, and SIGTERM exits 1."""
    url, procs = _start_pair(group)
    rank0, follower = procs
    t0 = time.monotonic()
    os.kill(rank0.pid, signal.SIGSTOP)
    try:
        took = wait_exit([follower], 15)
    finally:
        os.kill(rank0.pid, signal.SIGCONT)
    assert took < 8, f"the follower of a stopped rank 0 ran on {took:.1f} s"
    assert 4.5 <= time.monotonic() - t0, "the follower stopped before the peer timeout"
    assert follower.popen.returncode == 2
    lines = follower.stderr.strip().splitlines()
    assert "Traceback" not in follower.stderr and lines[-1] == (
        "foldserve: rank 0 lost: no heartbeat from it for 5 s (stopped, hung, or its host "
        "unreachable); restart every rank"), follower.stderr[-2000:]
    _assert_unhealthy_soon(url, procs[:1], within=5)
    rank0.popen.send_signal(signal.SIGTERM)
    assert wait_exit([rank0], 30) < 30 and rank0.popen.returncode == 1
    print(f"the follower of a stopped rank 0 exited {took:.2f} s after the stop")


def test_a_step_longer_than_the_peer_timeout_trips_nothing(group):
    """--peer-timeout 1.5 and one prefill round of 448 tokens on the 135M shape: the round
    takes longer than the timeout (128 tokens took 1.2 s on a quiet 2-core box and 3 to 12 s
    at load 14, so 448 in one round keeps it past 1.5 s either way); the heartbeat answers
    beside it. (At 0.5 s a follower idle on a box at load 14 once missed it.)"""
    url, procs = _start_pair(group, "dummy:smollm2-135m",
                             ["--peer-timeout", "1.5", "--prefill-chunk", "448"])
    t0 = time.monotonic()
    r = completion(url, prompt=[(7 * k) % 500 + 1 for k in range(448)], max_tokens=1,
                   temperature=0, ignore_eos=True)
    took = time.monotonic() - t0
    assert r.status_code == 200, r.text
    assert took > 1.5, f"the prefill took {took:.2f} s: too short to test the timeout"
    assert httpx.get(url + "/health").json()["status"] == "ok"
    assert "lost" not in procs[0].stderr
    print(f"a 448-token prefill round took {took:.2f} s at --peer-timeout 1.5: no rank lost")


def test_a_launched_follower_that_dies_is_reaped(group):
    port = free_port()
    url = f"http://{HOST}:{port}"
    server = group.start(["--tp", "2", "--port", str(port), *TINY], name="rank0")
    wait_health(url, [server])
    (child,) = launched_ranks(server.pid)
    os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.path.exists(f"/proc/{child}") and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{child}"), "the killed follower is left a zombie"
    _assert_unhealthy_soon(url, [server], within=5)
    assert f"rank 1 (pid {child}) was killed by signal 9" in server.stderr
    server.popen.send_signal(signal.SIGTERM)
    assert wait_exit([server], 30) < 30 and server.popen.returncode == 1


# ---- deploy/: the scripts an operator runs -----------------------------------------------

DEPLOY = REPO / "deploy"


def _script(name: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items()
            if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    full.update(env or {})
    return subprocess.run(["bash", str(DEPLOY / name), *args], capture_output=True, text=True,
                          env=full, timeout=30)


@pytest.mark.parametrize("name", ["one-host.sh", "rank.sh", "common.sh"])
def test_deploy_scripts_parse(name):
    r = subprocess.run(["bash", "-n", str(DEPLOY / name)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_env_file_documents_every_variable():
    import re
    text = (DEPLOY / "foldserve.env").read_text()
    config = (REPO / "server/config.py").read_text()
    from server.config import RENAMED
    old = set(RENAMED.values())                    # still read, not documented as settings
    read = set(re.findall(r'"((?:TF|FOLDSERVE)_[A-Z_]+)"', config)) - old | {"TF_MODEL"}
    for var in sorted(read) + ["RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK",
                               "NCCL_NVLS_ENABLE"]:
        assert re.search(rf"^#?{var}=", text, re.M), f"{var} is not in deploy/foldserve.env"
    # bash reads it as the scripts do (systemd's EnvironmentFile takes the same lines)
    r = subprocess.run(["bash", "-c", 'set -a; . "$1"; echo "$TF_KV_PAGES|$NCCL_NVLS_ENABLE"',
                        "_", str(DEPLOY / "foldserve.env")], capture_output=True, text=True)
    assert r.stdout.strip() == "auto|0", r.stderr
    unit = (DEPLOY / "foldserve-rank@.service").read_text()
    assert "EnvironmentFile=" in unit and "env RANK=%i " in unit


def test_deploy_scripts_build_the_commands():
    env = {"FOLDSERVE_DRY_RUN": "1", "PYTHON": sys.executable}
    one = _script("one-host.sh", "3", "--port", "9000", env=env)
    assert one.returncode == 0, one.stderr
    assert "serve --tp 3 --port-retries 10 --host 127.0.0.1" in one.stdout
    assert one.stdout.strip().endswith("--port 9000")
    rank = _script("rank.sh", "1", "2", "10.0.0.1:29551", env=env)
    assert rank.returncode == 0, rank.stderr
    assert "serve --tp 2 --rank 1 --master 10.0.0.1:29551 --host 127.0.0.1" in rank.stdout
    for bad in (("4",), ("x",), ()):
        r = _script("one-host.sh", *bad, env=env)
        assert r.returncode == 2 and "usage" in r.stderr
    r = _script("rank.sh", "2", "2", "10.0.0.1:29551", env=env)
    assert r.returncode == 2 and "outside 0..1" in r.stderr


def test_one_host_script_serves_at_tp2(group):
    port = free_port()
    url = f"http://{HOST}:{port}"
    env = {"FOLDSERVE_ENV": "/dev/null", "PYTHON": sys.executable}
    proc = group.start_cmd(["bash", str(DEPLOY / "one-host.sh"), "2", "--device", "cpu", "--model",
                            "dummy:tiny", "--context", "512", "--port", str(port)],
                           env=env, name="one-host")
    health = wait_health(url, [proc])
    assert health["tp"] == 2 and health["ranks"] == 2
    r = completion(url, prompt=[5, 6, 7], max_tokens=3, temperature=0)
    assert r.status_code == 200 and r.json()["usage"]["completion_tokens"] == 3
