"""The bench's numbers, on an exact small case, as `vllm bench serve` defines them."""
from server.bench import Result, percentile, summarize


def test_percentile_matches_numpy_linear():
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([0, 10], 99) == 9.9
    assert percentile([5], 99) == 5
    assert percentile([], 50) == 0.0


def test_summary_exact():
    rs = [Result(ok=True, prompt_len=10, output_tokens=5, ttft=0.1, latency=0.5,
                 itl=[0.1, 0.1, 0.1, 0.1]),
          Result(ok=True, prompt_len=10, output_tokens=3, ttft=0.2, latency=0.4, itl=[0.1, 0.1]),
          Result(ok=False, error="HTTP 503")]
    s = summarize(rs, duration=2.0)
    assert (s["completed"], s["failed"]) == (2, 1)
    assert s["request_throughput"] == 1.0
    assert s["output_throughput"] == 4.0 and s["total_token_throughput"] == 14.0
    assert abs(s["ttft_ms"]["mean"] - 150) < 1e-9
    # TPOT: (0.5-0.1)/4 = 100 ms and (0.4-0.2)/2 = 100 ms
    assert abs(s["tpot_ms"]["median"] - 100) < 1e-9
    assert abs(s["itl_ms"]["mean"] - 100) < 1e-9
    assert s["errors"] == ["HTTP 503"]
