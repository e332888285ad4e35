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


def test_goodput_counts_requests_meeting_every_slo():
    rs = [Result(ok=True, prompt_len=1, output_tokens=5, ttft=0.1, latency=0.5),   # TPOT 100 ms
          Result(ok=True, prompt_len=1, output_tokens=5, ttft=0.3, latency=0.7),   # TTFT 300 ms
          Result(ok=True, prompt_len=1, output_tokens=3, ttft=0.1, latency=0.9)]   # TPOT 400 ms
    s = summarize(rs, duration=2.0, slo_ttft_ms=200, slo_tpot_ms=200)
    assert s["good_requests"] == 1 and s["goodput"] == 0.5
    assert summarize(rs, duration=2.0)["good_requests"] == 3        # no SLO: every success


def test_percentiles_of_choice():
    rs = [Result(ok=True, prompt_len=1, output_tokens=2, ttft=t / 1000, latency=1.0)
          for t in (10, 20, 30, 40)]
    s = summarize(rs, duration=1.0, percentiles=(25, 90))
    assert s["ttft_ms"]["p25"] == percentile([10, 20, 30, 40], 25) == 17.5
    assert abs(s["ttft_ms"]["p90"] - 37.0) < 1e-9


def test_lengths_ranges_prefix_and_arrivals_are_seeded():
    from server.bench import arrival_delays, output_lens, prompts
    a = prompts(50, 100, 7, range_ratio=0.5, shared_prefix=16)
    assert a == prompts(50, 100, 7, range_ratio=0.5, shared_prefix=16)
    assert all(p[:16] == a[0][:16] for p in a)                       # one shared prefix
    lens = [len(p) - 16 for p in a]
    assert min(lens) >= 50 and max(lens) <= 150 and len(set(lens)) > 10
    assert [len(p) for p in prompts(5, 100, 7)] == [100] * 5           # ratio 0: exact
    outs = output_lens(50, 20, 7, 0.5)
    assert all(10 <= n <= 30 for n in outs)
    assert arrival_delays(4, float("inf"), 0) == [0.0] * 4
    d = arrival_delays(2000, 50.0, 3)
    assert d == sorted(d) and d[0] == 0.0
    gaps = [b - a for a, b in zip(d, d[1:])]
    assert abs(sum(gaps) / len(gaps) - 1 / 50.0) < 0.002               # mean gap 1/rate


def test_sampled_requests_carry_distinct_seeds():
    import argparse
    from server.bench import add_arguments, sampling_fields
    p = argparse.ArgumentParser()
    add_arguments(p)
    args = p.parse_args(["--url", "x", "--temperature", "0.8", "--top-p", "0.95", "--seed", "5"])
    assert sampling_fields(args, 0) == {"temperature": 0.8, "top_p": 0.95, "seed": 5}
    assert sampling_fields(args, 3)["seed"] == 8
    greedy = p.parse_args(["--url", "x"])
    assert sampling_fields(greedy, 0) == {"temperature": 0.0}
