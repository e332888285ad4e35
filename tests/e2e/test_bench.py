"""`foldserve bench` against our own real server prints its metrics (the numbers of
`vllm bench serve`): request and output-token throughput, TTFT, TPOT and ITL."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

import httpx
import pytest

from .live import ROOT

pytestmark = pytest.mark.slow


def bench_command(url: str, *args: str) -> list[str]:
    # the `foldserve` console script where it is installed, else its entry point
    # (pyproject: foldserve = "server.cli:main")
    exe = shutil.which("foldserve")
    head = [exe] if exe else [sys.executable, "-m", "server.cli"]
    return [*head, "bench", "--url", url, *args]


def test_bench_prints_positive_metrics(paged):
    cmd = bench_command(paged.url, "--concurrency", "4", "--requests", "16", "--input-len", "64",
                        "--output-len", "16", "--json")
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    assert (m["completed"], m["failed"], m["errors"]) == (16, 0, [])
    assert m["model"] == paged.model
    assert m["total_input_tokens"] == 16 * 64
    assert m["total_output_tokens"] == 16 * 16             # ignore_eos: every token asked for
    for key in ("request_throughput", "output_throughput", "total_token_throughput", "duration_s"):
        assert m[key] > 0, key
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"):
        assert m[key]["mean"] > 0 and m[key]["median"] > 0 and m[key]["p99"] > 0, (key, m[key])
        assert m[key]["p99"] >= m[key]["median"], (key, m[key])
    assert m["output_throughput"] == pytest.approx(m["total_output_tokens"] / m["duration_s"])
    assert m["e2el_ms"]["mean"] > m["ttft_ms"]["mean"]
    paged.wait_idle()


def test_bench_table(paged):
    cmd = bench_command(paged.url, "--concurrency", "2", "--requests", "2", "--input-len", "16",
                        "--output-len", "4")
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    for label in ("Request throughput (req/s)", "Output token throughput (tok/s)",
                  "Mean TTFT (ms)", "Mean TPOT (ms)", "Mean ITL (ms)", "P99 ITL (ms)"):
        assert label in out.stdout, out.stdout
    rows = dict(line.rsplit(None, 1) for line in out.stdout.splitlines()
                if line and not line.startswith("=") and len(line.split()) > 1)
    assert rows["Successful requests"].strip() == "2" and rows["Failed requests"].strip() == "0"
    assert float(rows["Output token throughput (tok/s)"]) > 0


def test_bench_sampled_poisson_shared_prefix(paged):
    """The traffic-model flags reach the server: sampled requests with seeds, Poisson arrivals,
    a shared prefix and length ranges all complete, and goodput is reported."""
    cmd = bench_command(paged.url, "--concurrency", "4", "--requests", "8", "--input-len", "32",
                        "--output-len", "8", "--random-range-ratio", "0.5",
                        "--shared-prefix-len", "16", "--request-rate", "20",
                        "--temperature", "0.8", "--top-p", "0.95", "--top-k", "40",
                        "--slo-ttft", "60000", "--percentiles", "50,90", "--json")
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    m = json.loads(out.stdout)
    assert (m["completed"], m["failed"]) == (8, 0), m["errors"]
    assert m["request_rate"] == 20.0
    assert m["good_requests"] == 8 and m["goodput"] > 0
    assert 8 * (16 + 16) <= m["total_input_tokens"] <= 8 * (16 + 48)
    assert "p90" in m["ttft_ms"]
    paged.wait_idle()


def test_bench_chat_sharegpt_warmups_and_saved_result(paged, tmp_path):
    """The real model's chat template and tokenizer: ShareGPT-style text conversations on the
    chat endpoint, max_tokens from each recorded reply's tokens (the server's /tokenize),
    warm-ups not counted, and the saved file in vLLM's layout."""
    conv = [("What is the capital of France?", "The capital of France is Paris."),
            ("Name a prime number.", "Seven is a prime number."),
            ("Say hello.", "Hello!")]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([{"conversations": [{"from": "human", "value": q},
                                                {"from": "gpt", "value": a}]} for q, a in conv]))
    out = tmp_path / "res"
    cmd = bench_command(paged.url, "--backend", "openai-chat", "--dataset-name", "sharegpt",
                        "--dataset-path", str(f), "--num-prompts", "3", "--disable-shuffle",
                        "--num-warmups", "2", "--save-result", "--save-detailed",
                        "--result-dir", str(out), "--result-filename", "chat.json", "--json")
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    m = json.loads(r.stdout)
    assert (m["completed"], m["failed"], m["warmups_failed"]) == (3, 0, 0), m["errors"]
    saved = json.loads((out / "chat.json").read_text())
    want = [len(httpx.post(paged.url + "/tokenize", json={"prompt": a, "add_special_tokens": False},
                           timeout=30).json()["tokens"]) for _, a in conv]
    assert saved["output_lens"] == want                      # ignore_eos: each reply's length
    assert saved["total_output_tokens"] == m["total_output_tokens"] == sum(want)
    # the chat's prompt tokens (its template included) from usage: more than the question's
    for (q, _), n in zip(conv, saved["input_lens"]):
        assert n > len(httpx.post(paged.url + "/tokenize", json={"prompt": q}, timeout=30).json()["tokens"])
    assert saved["backend"] == "openai-chat" and saved["completed"] == 3
    assert saved["mean_ttft_ms"] > 0 and saved["p99_itl_ms"] >= saved["median_itl_ms"]
    paged.wait_idle()
