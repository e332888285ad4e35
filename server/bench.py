"""foldserve bench: load any OpenAI-compatible server and report what `vllm bench serve`
reports, defined the same way:

  TTFT  send -> first chunk with text, per request
  TPOT  (e2e latency - TTFT) / (output tokens - 1), per request with > 1 output token
  ITL   every gap between successive text chunks, across all requests
  throughput = completed requests (or tokens) / benchmark duration

Prompts are random token-id lists of exactly --input-len ids in [1000, 20000) (seeded),
sent as /v1/completions prompts, with max_tokens=--output-len and ignore_eos, streamed.
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

import httpx

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


def prompts(n: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randrange(*ID_RANGE) for _ in range(length)] for _ in range(n)]


async def one_request(client: httpx.AsyncClient, model: str, prompt: list[int],
                      output_len: int) -> Result:
    body = {"model": model, "prompt": prompt, "max_tokens": output_len, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
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


def stats_ms(xs: list) -> dict:
    ms = [x * 1000.0 for x in xs]
    return {"mean": sum(ms) / len(ms) if ms else 0.0, "median": percentile(ms, 50),
            "p99": percentile(ms, 99)}


def summarize(results: list[Result], duration: float) -> dict:
    done = [r for r in results if r.ok]
    total_in = sum(r.prompt_len for r in done)
    total_out = sum(r.output_tokens for r in done)
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in done if r.output_tokens > 1]
    errors = sorted({r.error for r in results if not r.ok})
    return {
        "completed": len(done), "failed": len(results) - len(done),
        "duration_s": duration,
        "total_input_tokens": total_in, "total_output_tokens": total_out,
        "request_throughput": len(done) / duration if duration else 0.0,
        "output_throughput": total_out / duration if duration else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration else 0.0,
        "ttft_ms": stats_ms([r.ttft for r in done]),
        "tpot_ms": stats_ms(tpots),
        "itl_ms": stats_ms([g for r in done for g in r.itl]),
        "e2el_ms": stats_ms([r.latency for r in done]),
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
    for key, title in (("ttft_ms", "TTFT"), ("tpot_ms", "TPOT"), ("itl_ms", "ITL"),
                       ("e2el_ms", "E2EL")):
        for stat, label in (("mean", "Mean"), ("median", "Median"), ("p99", "P99")):
            rows.append((f"{label} {title} (ms)", f"{s[key][stat]:.2f}"))
    width = 50
    lines = ["{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=width, c="=")]
    lines += [f"{k:<38}{v!s:>12}" for k, v in rows]
    lines += [f"error: {e}" for e in s["errors"]]
    lines.append("=" * width)
    return "\n".join(lines)


async def bench(args) -> dict:
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

        async def gated(p):
            async with gate:
                return await one_request(client, model, p, args.output_len)

        start = time.perf_counter()
        results = await asyncio.gather(*(gated(p) for p in prompts(args.requests, args.input_len,
                                                                    args.seed)))
        duration = time.perf_counter() - start
    return {"model": model, **summarize(list(results), duration)}


def run(args) -> int:
    # httpx logs every request at INFO ("HTTP Request: POST ... 200 OK"): a line a request here
    logging.getLogger("httpx").setLevel(logging.WARNING)
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
