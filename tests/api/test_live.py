"""A real uvicorn on a free port: the openai client (chat and completions, streamed and
not, usage right) and the bench client, against the fake scheduler."""
import argparse
import json
import threading
import time

import httpx
import openai
import pytest
import uvicorn

from api_fakes import FakeScheduler, make_state
from server import bench
from server.api import create_app
from free_ports import free_port as _free_port


def free_port() -> int:
    return _free_port("127.0.0.1")   # below the ephemeral range: tests/free_ports.py


@pytest.fixture(scope="module")
def live():
    sched = FakeScheduler(delay=0.001)
    app = create_app(make_state(sched, context=4096, api_keys=("k",)))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 10
    while not server.started:
        assert time.time() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", sched
    server.should_exit = True
    thread.join(5)


def test_openai_client(live):
    url, sched = live
    client = openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0)

    r = client.completions.create(model="fake-model", prompt="hi", max_tokens=5)
    assert r.choices[0].text == "Hello" and r.choices[0].finish_reason == "length"
    assert (r.usage.prompt_tokens, r.usage.completion_tokens, r.usage.total_tokens) == (3, 5, 8)

    chunks = list(client.completions.create(model="fake-model", prompt="hi", max_tokens=5,
                                            stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == "Hello"
    assert chunks[-1].usage.completion_tokens == 5

    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    r = client.chat.completions.create(model="fake-model", messages=msgs, max_tokens=7)
    assert r.choices[0].message.content == "Hello, " and r.choices[0].message.role == "assistant"
    assert r.usage.completion_tokens == 7
    assert r.usage.prompt_tokens == len(sched.started[-1].prompt_ids)

    chunks = list(client.chat.completions.create(model="fake-model", messages=msgs, max_tokens=7,
                                                 stream=True, stream_options={"include_usage": True}))
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "Hello, "
    assert chunks[-1].usage.completion_tokens == 7

    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="fake-model", messages=msgs, temperature=5)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=url + "/v1", api_key="bad", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="nope", prompt="x")


def bench_args(url, **kw):
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    return p.parse_args(["--url", url, "--api-key", "k", "--requests", "12", "--concurrency", "4",
                         "--input-len", "32", "--output-len", "8", *kw.get("extra", [])])


def test_bench_table(live, capsys):
    url, _ = live
    assert bench.run(bench_args(url)) == 0
    out = capsys.readouterr().out
    for label in ("Request throughput (req/s)", "Output token throughput (tok/s)",
                  "Mean TTFT (ms)", "P99 TPOT (ms)", "Median ITL (ms)", "Successful requests"):
        assert label in out
    assert "Model" in out and "fake-model" in out


def test_bench_json(live, capsys):
    url, sched = live
    assert bench.run(bench_args(url, extra=["--json"])) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["completed"] == 12 and s["failed"] == 0
    assert s["total_input_tokens"] == 12 * 32 and s["total_output_tokens"] == 12 * 8
    assert s["ttft_ms"]["mean"] > 0 and s["itl_ms"]["p99"] >= s["itl_ms"]["median"] > 0
    assert s["request_throughput"] > 0
    assert all(r.params.ignore_eos and len(r.prompt_ids) == 32 for r in sched.started[-12:])


def test_bench_unreachable(capsys):
    p = argparse.ArgumentParser()
    bench.add_arguments(p)
    assert bench.run(p.parse_args(["--url", "http://127.0.0.1:9", "--requests", "1"])) == 1


def test_metrics_after_live_traffic(live):
    url, _ = live
    text = httpx.get(url + "/metrics").text
    assert "vllm:time_to_first_token_seconds_bucket" in text
    assert "foldserve:e2e_request_latency_seconds_count" in text


@pytest.mark.parametrize("stream", [False, True])
def test_client_leaving_a_real_server_cancels(live, stream):
    url, sched = live
    seen = len(sched.started)
    body = {"prompt": "x", "max_tokens": 3000, "stream": stream}
    with httpx.Client(timeout=httpx.Timeout(0.3, connect=5)) as c:
        if stream:      # read one chunk, then hang up
            with c.stream("POST", url + "/v1/completions", json=body,
                          headers={"Authorization": "Bearer k"}) as r:
                next(r.iter_bytes())
        else:           # nothing comes for 3 s: the read times out and the client hangs up
            with pytest.raises(httpx.ReadTimeout):
                c.post(url + "/v1/completions", json=body, headers={"Authorization": "Bearer k"})
    req = sched.started[seen]
    deadline = time.time() + 3
    while req.id not in sched.cancelled:
        assert time.time() < deadline, "the scheduler never heard cancel()"
        time.sleep(0.02)
    assert req.id not in sched.active
