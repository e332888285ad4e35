"""foldserve bench: load any OpenAI-compatible server and report what `vllm bench serve`
reports, defined the same way:

  TTFT  send -> first chunk with text, per request
  TPOT  (e2e latency - TTFT) / (output tokens - 1), per request with > 1 output token
  ITL   every gap between successive text chunks, across all requests
  throughput = completed requests (or tokens) / benchmark duration

Prompts are random token-id lists of --input-len ids in [1000, 20000) (seeded), sent as
/v1/completions prompts, with max_tokens=--output-len and ignore_eos, streamed. As in
`vllm bench serve`: --random-range-ratio r draws each request's lengths uniformly from
[len * (1 - r), len * (1 + r)]; --shared-prefix-len puts the same leading ids before every
prompt (a common system prompt: the prompt cache is exercised); --request-rate sends
requests as a Poisson process of that rate (inf: all at once), --concurrency caps those in
flight; goodput counts the requests that meet every --slo-ttft / --slo-tpot (ms).
Sampling: --temperature, --top-p, --top-k; with temperature > 0 request i carries seed
--seed + i, so a run is repeatable.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import random
import sys
import time
from dataclasses import dataclass, field


ID_RANGE = (1000, 20000)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", required=True, help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="model name (default: the first of /v1/models)")
    p.add_argument("--concurrency", type=int, default=8, help="requests in flight at once")
    p.add_argument("--requests", type=int, default=32, help="requests in all")
    p.add_argument("--input-len", type=int, default=128, help="prompt tokens per request")
    p.add_argument("--output-len", type=int, default=64, help="max_tokens per request")
    p.add_argument("--seed", type=int, default=0, help="seed for the random prompts")
    p.add_argument("--api-key", default=None, help="bearer key, when the server wants one")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per request")
    p.add_argument("--json", action="store_true", help="print one JSON object, no table")
    p.add_argument("--request-rate", type=float, default=float("inf"),
                   help="requests per second, Poisson arrivals (inf: all at once)")
    p.add_argument("--random-range-ratio", type=float, default=0.0,
                   help="lengths uniform in [len*(1-r), len*(1+r)] (0: exactly len)")
    p.add_argument("--shared-prefix-len", type=int, default=0,
                   help="the same leading token ids before every prompt (0: none)")
    p.add_argument("--temperature", type=float, default=0.0, help="sampling temperature")
    p.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass")
    p.add_argument("--top-k", type=int, default=None, help="sample among the k most likely")
    p.add_argument("--slo-ttft", type=float, default=None, help="goodput: TTFT limit in ms")
    p.add_argument("--slo-tpot", type=float, default=None, help="goodput: TPOT limit in ms")
    p.add_argument("--percentiles", default="50,99",
                   help="comma-separated percentiles to report for each latency")


@dataclass
class Result:
    ok: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list = field(default_factory=list)
    error: str = ""


def base_url(url: str) -> str:
    url = url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def prompts(n: int, length: int, seed: int, *, range_ratio: float = 0.0,
            shared_prefix: int = 0) -> list[list[int]]:
    """n prompts: a shared prefix of `shared_prefix` ids, then each its own ids, `length`
    of them, or a length drawn from [length*(1-r), length*(1+r)] (at least 1)."""
    rng = random.Random(seed)
    prefix = [rng.randrange(*ID_RANGE) for _ in range(shared_prefix)]
    return [prefix + [rng.randrange(*ID_RANGE) for _ in range(draw_len(rng, length, range_ratio))]
            for _ in range(n)]


def draw_len(rng: random.Random, length: int, ratio: float) -> int:
    if ratio <= 0:
        return length
    lo, hi = int(length * (1 - ratio)), int(length * (1 + ratio))
    return max(1, rng.randint(max(1, lo), max(1, hi)))


def output_lens(n: int, length: int, seed: int, ratio: float) -> list[int]:
    rng = random.Random(seed + 1)
    return [draw_len(rng, length, ratio) for _ in range(n)]


def arrival_delays(n: int, rate: float, seed: int) -> list[float]:
    """Seconds from the start at which each request is sent: a Poisson process of `rate`
    requests a second (exponential gaps), or all at 0 when the rate is infinite."""
    if rate == float("inf") or rate <= 0:
        return [0.0] * n
    rng = random.Random(seed + 2)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def sampling_fields(args, i: int) -> dict:
    body = {"temperature": args.temperature}
    if args.top_p is not None:
        body["top_p"] = args.top_p
    if args.top_k is not None:
        body["top_k"] = args.top_k
    if args.temperature > 0:
        body["seed"] = args.seed + i
    return body


async def one_request(client: httpx.AsyncClient, model: str, prompt: list[int],
                      output_len: int, sampling: dict | None = None) -> Result:
    import httpx      # here, not at the top: every foldserve command's parser imports this module
    body = {"model": model, "prompt": prompt, "max_tokens": output_len, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
            **(sampling or {})}
    res = Result(prompt_len=len(prompt))
    start = time.perf_counter()
    last = None
    chunks = 0
    try:
        async with client.stream("POST", "/v1/completions", json=body) as r:
            if r.status_code != 200:
                res.error = f"HTTP {r.status_code}: {(await r.aread()).decode(errors='replace')[:200]}"
                return res
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                obj = json.loads(data)
                if "error" in obj:
                    res.error = str(obj["error"].get("message"))
                    return res
                if obj.get("usage"):
                    res.output_tokens = obj["usage"].get("completion_tokens", 0)
                    res.prompt_len = obj["usage"].get("prompt_tokens", res.prompt_len)
                if any(c.get("text") for c in obj.get("choices") or ()):
                    now = time.perf_counter()
                    if last is None:
                        res.ttft = now - start
                    else:
                        res.itl.append(now - last)
                    last = now
                    chunks += 1
        res.latency = time.perf_counter() - start
        res.output_tokens = res.output_tokens or chunks
        res.ok = last is not None
        if not res.ok:
            res.error = "no text came back"
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        res.error = f"{type(e).__name__}: {e}"
    return res


def percentile(xs: list, q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not xs:
        return 0.0
    s = sorted(xs)
    k = (len(s) - 1) * q / 100.0
    lo = int(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def stats_ms(xs: list, percentiles=(50, 99)) -> dict:
    ms = [x * 1000.0 for x in xs]
    out = {"mean": sum(ms) / len(ms) if ms else 0.0, "median": percentile(ms, 50),
           "p99": percentile(ms, 99)}
    for q in percentiles:
        out[f"p{q:g}"] = percentile(ms, q)
    return out


def tpot(r: Result) -> float | None:
    return (r.latency - r.ttft) / (r.output_tokens - 1) if r.output_tokens > 1 else None


def meets_slo(r: Result, slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> bool:
    if slo_ttft_ms is not None and r.ttft * 1000.0 > slo_ttft_ms:
        return False
    t = tpot(r)
    return not (slo_tpot_ms is not None and t is not None and t * 1000.0 > slo_tpot_ms)


def summarize(results: list[Result], duration: float, *, percentiles=(50, 99),
              slo_ttft_ms: float | None = None, slo_tpot_ms: float | None = None) -> dict:
    done = [r for r in results if r.ok]
    total_in = sum(r.prompt_len for r in done)
    total_out = sum(r.output_tokens for r in done)
    tpots = [t for t in map(tpot, done) if t is not None]
    errors = sorted({r.error for r in results if not r.ok})
    good = sum(meets_slo(r, slo_ttft_ms, slo_tpot_ms) for r in done)
    stats = lambda xs: stats_ms(xs, percentiles)  # noqa: E731
    return {
        "completed": len(done), "failed": len(results) - len(done),
        "duration_s": duration,
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": total_out / duration if duration else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration else 0.0,
        "good_requests": good,
        "goodput": good / duration if duration else 0.0,
        "ttft_ms": stats([r.ttft for r in done]),
        "tpot_ms": stats(tpots),
        "itl_ms": stats([g for r in done for g in r.itl]),
        "e2el_ms": stats([r.latency for r in done]),
        "errors": errors[:5],
    }


def table(s: dict, args) -> str:
    rows = [("Model", s["model"]), ("Concurrency", args.concurrency),
            ("Successful requests", s["completed"]), ("Failed requests", s["failed"]),
            ("Benchmark duration (s)", f"{s['duration_s']:.2f}"),
            ("Total input tokens", s["total_input_tokens"]),
            ("Total generated tokens", s["total_output_tokens"]),
            ("Request throughput (req/s)", f"{s['request_throughput']:.2f}"),
            ("Output token throughput (tok/s)", f"{s['output_throughput']:.2f}"),
            ("Total token throughput (tok/s)", f"{s['total_token_throughput']:.2f}")]
    if args.slo_ttft is not None or args.slo_tpot is not None:
        rows.append(("Request goodput (req/s)", f"{s['goodput']:.2f}"))
    stat_rows = [("mean", "Mean"), ("median", "Median")]
    stat_rows += [(f"p{q:g}", f"P{q:g}") for q in parse_percentiles(args.percentiles)]
    for key, title in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                       ("e2el_ms", "E2EL")):
        for stat, label in stat_rows:
            rows.append((f"{label} {title} (ms)", f"{s[key][stat]:.2f}"))
    width = 50
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=width, c="=")]
    lines += [f"{k:<38}{v!s:>12}" for k, v in rows]
    lines += [f"error: {e}" for e in s["errors"]]
    lines.append("=" * width)
    return "\n".join(lines)


def parse_percentiles(text: str) -> tuple[float, ...]:
    qs = tuple(float(q) for q in str(text).split(",") if q.strip())
    if not qs or any(not 0 <= q <= 100 for q in qs):
        raise ValueError(f"--percentiles wants numbers in [0, 100], got {text!r}")
    return qs


async def bench(args) -> dict:
    import httpx
    headers = {"Authorization": f"Bearer {args.api_key}"} if args.api_key else {}
    limits = httpx.Limits(max_connections=args.concurrency + 2)
    async with httpx.AsyncClient(base_url=base_url(args.url), headers=headers, limits=limits,
                                 timeout=httpx.Timeout(args.timeout, connect=10.0)) as client:
        model = args.model
        if model is None:
            r = await client.get("/v1/models")
            r.raise_for_status()
            model = r.json()["data"][0]["id"]
        gate = asyncio.Semaphore(max(1, args.concurrency))
        ps = prompts(args.requests, args.input_len, args.seed,
                     range_ratio=args.random_range_ratio, shared_prefix=args.shared_prefix_len)
        outs = output_lens(args.requests, args.output_len, args.seed, args.random_range_ratio)
        delays = arrival_delays(args.requests, args.request_rate, args.seed)
        start = time.perf_counter()

        async def gated(i):
            wait = start + delays[i] - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            async with gate:
                return await one_request(client, model, ps[i], outs[i], sampling_fields(args, i))

        results = await asyncio.gather(*(gated(i) for i in range(args.requests)))
        duration = time.perf_counter() - start
    rate = None if args.request_rate == float("inf") else args.request_rate  # JSON has no inf
    return {"model": model, "request_rate": rate,
            **summarize(list(results), duration, percentiles=parse_percentiles(args.percentiles),
                        slo_ttft_ms=args.slo_ttft, slo_tpot_ms=args.slo_tpot)}


def run(args) -> int:
    import httpx
    # httpx logs every request at INFO ("HTTP Request: POST ... 200 OK"): a line a request here
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        parse_percentiles(args.percentiles)
        if not 0 <= args.random_range_ratio < 1:
            raise ValueError(f"--random-range-ratio wants [0, 1), got {args.random_range_ratio}")
    except ValueError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    try:
        summary = asyncio.run(bench(args))
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        print(f"bench: cannot reach a model at {args.url}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    print(json.dumps(summary) if args.json else table(summary, args), flush=True)
    return 0 if summary["completed"] else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="foldserve bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
