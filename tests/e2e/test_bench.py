"""`foldserve bench` against our own real server prints its metrics (the numbers of
`vllm bench serve`): request and output-token throughput, TTFT, TPOT and ITL."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys

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
