"""Prometheus metrics, one registry per app, each under two names: `foldserve:` and the
`vllm:` name dashboards for vLLM already use (':' is legal in Prometheus names).

Latencies are observed by the request driver, queue time by the scheduler through the
`admitted` hook (create_app hands this object to a scheduler whose `metrics` is None), the
tokens of each round through the `iteration` hook; gauges (running, waiting, KV usage,
cache_config_info) are read from scheduler.stats() at scrape time, so they are never stale.

KV usage follows vLLM's meaning over the pool's pages (free + held + kept == total):
`kv_cache_usage_perc` is the pages running streams hold; the prompt cache's kept pages,
which admission evicts when it needs them (as vLLM counts cached free blocks as free), are
`foldserve:kv_cache_kept_perc`. On whole windows the pool holds the prompt cache's pages only.
`num_preemptions_total` stays 0 by design: a request takes all its pages at admission.
"""
from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

FAMILIES = ("foldserve", "vllm")

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0)
ITL_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
               0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
TOKEN_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000,
                 100000, 200000, 500000, 1000000)          # vLLM's 1-2-5 series
ITERATION_BUCKETS = (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
E2E_BUCKETS = (0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0,
               40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


class _Pair:
    """One metric under both names, already labelled with the model name."""

    def __init__(self, kind, suffix, doc, registry, model, extra_labels=(), names=FAMILIES, **kw):
        self.metrics = [kind(f"{fam}:{suffix}", doc, ["model_name", *extra_labels],
                             registry=registry, **kw) for fam in names]
        self.model = model

    def observe(self, value: float) -> None:
        for m in self.metrics:
            m.labels(self.model).observe(value)

    def inc(self, value: float = 1.0, *labels) -> None:
        if value:
            for m in self.metrics:
                m.labels(self.model, *labels).inc(value)


class _StatsGauges:
    """Gauges read from scheduler.stats() when Prometheus scrapes."""

    def __init__(self, stats_fn, model):
        self.stats_fn, self.model = stats_fn, model

    def collect(self):
        try:
            s = self.stats_fn()
        except Exception:
            return
        total = s.get("pages_total") or 0
        kept = s.get("pages_kept") or 0
        usage = ((total - (s.get("pages_free") or 0) - kept) / total) if total else 0.0
        values = {
            "num_requests_running": ("Requests generating now", s.get("streams_busy", 0)),
            "num_requests_waiting": ("Requests waiting for admission", s.get("queue", 0)),
            "kv_cache_usage_perc": ("KV pages held by running streams, 0..1 (the prompt "
                                    "cache's kept pages are not counted)", usage),
        }
        for suffix, (doc, value) in values.items():
            for fam in FAMILIES:
                g = GaugeMetricFamily(f"{fam}:{suffix}", doc, labels=["model_name"])
                g.add_metric([self.model], float(value or 0))
                yield g
        g = GaugeMetricFamily("foldserve:kv_cache_kept_perc",
                              "KV pages the prompt cache keeps for reuse, 0..1", labels=["model_name"])
        g.add_metric([self.model], kept / total if total else 0.0)
        yield g
        for suffix, key in (("kv_pages_free", "pages_free"), ("kv_pages_total", "pages_total"),
                            ("kv_pages_kept", "pages_kept")):
            g = GaugeMetricFamily(f"foldserve:{suffix}", f"KV pages ({key})", labels=["model_name"])
            g.add_metric([self.model], float(s.get(key) or 0))
            yield g
        info = {"block_size": str(s.get("page_rows", "")), "num_gpu_blocks": str(total),
                "kv_mode": "pages" if s.get("paged", True) else "windows",
                "enable_prefix_caching": str(bool(kept or s.get("cache_pages"))).lower()}
        for fam in FAMILIES:
            g = GaugeMetricFamily(f"{fam}:cache_config_info", "The KV cache's configuration",
                                  labels=["model_name", *info])
            g.add_metric([self.model, *info.values()], 1.0)
            yield g


class Metrics:
    def __init__(self, model_name: str, stats_fn):
        self.registry = r = CollectorRegistry()
        m = model_name
        self.ttft = _Pair(Histogram, "time_to_first_token_seconds", "Time to first token",
                          r, m, buckets=TTFT_BUCKETS)
        self.itl = _Pair(Histogram, "inter_token_latency_seconds", "Time between tokens",
                         r, m, buckets=ITL_BUCKETS)
        self.tpot = _Pair(Histogram, "time_per_output_token_seconds",
                          "Time per output token (vLLM's older name for the token gap)",
                          r, m, names=("vllm",), buckets=ITL_BUCKETS)
        self.e2e = _Pair(Histogram, "e2e_request_latency_seconds", "Arrival to last token",
                         r, m, buckets=E2E_BUCKETS)
        self.queue = _Pair(Histogram, "request_queue_time_seconds", "Arrival to admission",
                           r, m, buckets=E2E_BUCKETS)
        self.prompt_tokens = _Pair(Counter, "prompt_tokens", "Prompt tokens", r, m)
        self.generation_tokens = _Pair(Counter, "generation_tokens", "Generated tokens", r, m)
        self.prefix_queries = _Pair(Counter, "prefix_cache_queries",
                                    "Prompt tokens looked up in the prompt cache", r, m)
        self.prefix_hits = _Pair(Counter, "prefix_cache_hits",
                                 "Prompt tokens resumed from the prompt cache", r, m)
        self.success = _Pair(Counter, "request_success", "Finished requests by reason",
                             r, m, extra_labels=("finished_reason",))
        self.request_prompt = _Pair(Histogram, "request_prompt_tokens", "Prompt tokens per request",
                                    r, m, buckets=TOKEN_BUCKETS)
        self.request_generation = _Pair(Histogram, "request_generation_tokens",
                                        "Generated tokens per request", r, m, buckets=TOKEN_BUCKETS)
        self.prefill_time = _Pair(Histogram, "request_prefill_time_seconds",
                                  "Admission to first token", r, m, buckets=E2E_BUCKETS)
        self.decode_time = _Pair(Histogram, "request_decode_time_seconds",
                                 "First token to last token", r, m, buckets=E2E_BUCKETS)
        self.iteration_tokens = _Pair(Histogram, "iteration_tokens_total",
                                      "Tokens per engine round (decodes and prefill chunks)",
                                      r, m, buckets=ITERATION_BUCKETS)
        # drafts (server/drafts/): vLLM's spec_decode names; a draft is one verify chunk
        self.drafts = _Pair(Counter, "spec_decode_num_drafts", "Verify passes (a stream's "
                            "drafts checked in a round)", r, m)
        self.draft_tokens = _Pair(Counter, "spec_decode_num_draft_tokens", "Tokens drafted", r, m)
        self.accepted_tokens = _Pair(Counter, "spec_decode_num_accepted_tokens",
                                     "Drafted tokens accepted (equal to the token drawn)", r, m)
        self.accepted_per_pos = _Pair(Counter, "spec_decode_num_accepted_tokens_per_pos",
                                      "Drafted tokens accepted, by their place in the draft",
                                      r, m, extra_labels=("position",))
        for pair in (self.drafts, self.draft_tokens, self.accepted_tokens):
            for c in pair.metrics:
                c.labels(m)                      # exposed at 0
        self.preemptions = _Pair(Counter, "num_preemptions",
                                 "Preempted requests (0 by design: pages are taken at admission)", r, m)
        for c in self.preemptions.metrics:
            c.labels(m)                          # exposed at 0
        self._queue_s: dict = {}                 # request id -> arrival to admission, seconds
        r.register(_StatsGauges(stats_fn, m))

    def token_gap(self, seconds: float) -> None:
        self.itl.observe(seconds)
        self.tpot.observe(seconds)

    def request_done(self, *, reason: str, e2e: float, prompt_tokens: int, cached_tokens: int,
                     completion_tokens: int, req_id: str | None = None,
                     first_token_s: float | None = None) -> None:
        """From the request driver, once per request, however it ended. first_token_s:
        arrival to the first token (None: no token came)."""
        self.e2e.observe(e2e)
        self.request_prompt.observe(prompt_tokens)
        self.request_generation.observe(completion_tokens)
        queued = self._queue_s.pop(req_id, None)
        if first_token_s is not None:
            if queued is not None:
                self.prefill_time.observe(max(0.0, first_token_s - queued))
            self.decode_time.observe(max(0.0, e2e - first_token_s))
        self.prompt_tokens.inc(prompt_tokens)
        self.generation_tokens.inc(completion_tokens)
        self.prefix_queries.inc(prompt_tokens)
        self.prefix_hits.inc(cached_tokens)
        self.success.inc(1, reason)

    # ---- hooks the scheduler calls from its engine thread (Scheduler(metrics=...)) ----
    def admitted(self, req, queue_s: float, resumed_rows: int = 0) -> None:
        self.queue.observe(max(0.0, queue_s))
        self._queue_s[req.id] = max(0.0, queue_s)

    def iteration(self, tokens: int) -> None:
        self.iteration_tokens.observe(tokens)

    def drafted(self, proposed: int, accepted: int) -> None:
        """One verify chunk: `proposed` drafted tokens, the first `accepted` of them taken."""
        self.drafts.inc(1)
        self.draft_tokens.inc(proposed)
        self.accepted_tokens.inc(accepted)
        for pos in range(accepted):
            self.accepted_per_pos.inc(1, str(pos))

    def finished(self, active, reason: str) -> None:
        pass    # the request driver observes the end (it also sees stop strings, clients leaving)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
