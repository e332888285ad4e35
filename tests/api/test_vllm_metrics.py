"""vLLM's metric names a dashboard expects, scraped through prometheus_client's own parser."""
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from api_fakes import FakeScheduler, make_state
from server.api import create_app


def scrape(client) -> dict:
    """name -> {suffixed sample name: [(labels, value)]} for every family exposed."""
    out = {}
    for fam in text_string_to_metric_families(client.get("/metrics").text):
        for s in fam.samples:
            out.setdefault(fam.name, {}).setdefault(s.name, []).append((s.labels, s.value))
    return out


def one(m: dict, family: str, sample: str) -> float:
    (labels, value), = m[family][sample]
    assert labels.get("model_name") == "fake-model"
    return value


def test_vllm_request_and_engine_metrics_after_two_requests():
    sched = FakeScheduler()
    with TestClient(create_app(make_state(sched))) as c:
        before = scrape(c)
        assert one(before, "vllm:num_preemptions", "vllm:num_preemptions_total") == 0
        c.post("/v1/completions", json={"prompt": "abc", "max_tokens": 4})
        c.post("/v1/completions", json={"prompt": "abc", "max_tokens": 4, "stream": True})
        app_metrics = c.app.state.metrics
        app_metrics.iteration(7)                   # what the scheduler calls each round
        app_metrics.iteration(300)
        m = scrape(c)
    for fam in ("vllm", "foldserve"):
        assert one(m, f"{fam}:request_prompt_tokens", f"{fam}:request_prompt_tokens_count") == 2
        assert one(m, f"{fam}:request_prompt_tokens", f"{fam}:request_prompt_tokens_sum") == 8
        assert one(m, f"{fam}:request_generation_tokens",
                   f"{fam}:request_generation_tokens_sum") == 8
        assert one(m, f"{fam}:request_prefill_time_seconds",
                   f"{fam}:request_prefill_time_seconds_count") == 2
        assert one(m, f"{fam}:request_decode_time_seconds",
                   f"{fam}:request_decode_time_seconds_count") == 2
        assert one(m, f"{fam}:iteration_tokens_total", f"{fam}:iteration_tokens_total_count") == 2
        assert one(m, f"{fam}:iteration_tokens_total", f"{fam}:iteration_tokens_total_sum") == 307
        assert one(m, f"{fam}:num_preemptions", f"{fam}:num_preemptions_total") == 0
        (labels, value), = m[f"{fam}:cache_config_info"][f"{fam}:cache_config_info"]
        assert value == 1 and labels["num_gpu_blocks"] == "64" and labels["kv_mode"] == "pages"
    buckets = {l["le"]: v for l, v in m["vllm:iteration_tokens_total"]["vllm:iteration_tokens_total_bucket"]}
    assert buckets["8.0"] == 1 and buckets["512.0"] == 2


def test_kv_usage_leaves_out_the_prompt_caches_kept_pages():
    sched = FakeScheduler()
    sched.state.update(pages_total=100, pages_free=70, pages_kept=20)
    with TestClient(create_app(make_state(sched))) as c:
        m = scrape(c)
    assert abs(one(m, "vllm:kv_cache_usage_perc", "vllm:kv_cache_usage_perc") - 0.10) < 1e-9
    assert abs(one(m, "foldserve:kv_cache_kept_perc", "foldserve:kv_cache_kept_perc") - 0.20) < 1e-9
    assert one(m, "foldserve:kv_pages_kept", "foldserve:kv_pages_kept") == 20
