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

In `vllm bench serve`'s names as well:
  --backend openai | openai-chat (vllm: openai), or --endpoint /v1/completions |
      /v1/chat/completions: the API the requests go to (one implies the other; a pair that
      disagree is refused). Chat requests carry one user message, streamed, ignore_eos, and
      count their tokens from the reply's usage (stream_options.include_usage).
  --dataset-name random (default: the ids above) | custom (--dataset-path a JSONL file, one
      {"prompt": "..."} a line) | sharegpt (--dataset-path a JSON list, or JSONL, of
      {"conversations": [{"from": "human", "value": ...}, {"from": "gpt", ...}, ...]}: the
      first turn is the prompt; entries of fewer than two turns are skipped). Text prompts go
      as `prompt` text to /v1/completions (no chat template applied) or as the user message;
      random ids go to the chat endpoint as their text (the server's /detokenize). Samples are
      shuffled with --seed unless --disable-shuffle, and drawn again at random when fewer
      than --num-prompts unless --no-oversample. max_tokens: --custom-output-len /
      --sharegpt-output-len, else --output-len; for sharegpt without either, the number of
      tokens of the recorded reply (the server's /tokenize).
  --num-warmups N: N requests (the first samples, at --max-concurrency) sent and awaited
      before the clock starts; they are not counted.
  --save-result: the run as one JSON file in vLLM's layout (date, backend, model_id,
      num_prompts, request_rate, max_concurrency, duration, completed, ..., mean_/median_/
      std_/pNN_{ttft,tpot,itl,e2el}_ms), named by --result-filename (default
      {label}-{request_rate}qps-concurrency{N}-{model}-{YYYYmmdd-HHMMSS}.json) in
      --result-dir (default: the current directory); --save-detailed adds the per-request
      input_lens, output_lens, ttfts, itls, generated_texts and errors; --label, --metadata
      KEY=VALUE as vLLM.
--num-prompts, --max-concurrency, --random-input-len, --random-output-len, --base-url and
--metric-percentiles are the same settings as --requests, --concurrency, --input-len,
--output-len, --url and --percentiles.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import math
import random
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path


ID_RANGE = (1000, 20000)
OUTPUT_LEN = 64                      # max_tokens when no --output-len (or dataset length) is given
BACKENDS = {"openai": "/v1/completions", "vllm": "/v1/completions",
            "openai-chat": "/v1/chat/completions"}
ENDPOINTS = {"/v1/completions": "openai", "/v1/chat/completions": "openai-chat"}
DATASETS = ("random", "custom", "sharegpt")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", "--base-url", dest="url", required=True,
                   help="server base URL, e.g. http://127.0.0.1:8000")
    p.add_argument("--model", default=None, help="model name (default: the first of /v1/models)")
    p.add_argument("--concurrency", "--max-concurrency", dest="concurrency", type=int, default=8,
                   help="requests in flight at once")
    p.add_argument("--requests", "--num-prompts", dest="requests", type=int, default=32,
                   help="requests in all")
    p.add_argument("--input-len", "--random-input-len", dest="input_len", type=int, default=128,
                   help="prompt tokens per request (the random dataset)")
    p.add_argument("--output-len", "--random-output-len", dest="output_len", type=int,
                   default=None, help=f"max_tokens per request (default {OUTPUT_LEN}; sharegpt: "
                   "the recorded reply's length)")
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
    p.add_argument("--percentiles", "--metric-percentiles", dest="percentiles", default="50,99",
                   help="comma-separated percentiles to report for each latency")
    p.add_argument("--backend", default=None, choices=sorted(BACKENDS),
                   help="openai: /v1/completions, openai-chat: /v1/chat/completions "
                   "(default: from --endpoint, else openai)")
    p.add_argument("--endpoint", default=None, choices=sorted(ENDPOINTS),
                   help="the API path (default: the --backend's)")
    p.add_argument("--dataset-name", default="random", choices=DATASETS,
                   help="random ids (default), custom (JSONL of {\"prompt\": ...}) or sharegpt")
    p.add_argument("--dataset-path", default=None, help="the custom or sharegpt file")
    p.add_argument("--custom-output-len", type=int, default=None,
                   help="max_tokens for the custom dataset (default: --output-len)")
    p.add_argument("--sharegpt-output-len", type=int, default=None,
                   help="max_tokens for sharegpt (default: --output-len, else the reply's length)")
    p.add_argument("--disable-shuffle", action="store_true",
                   help="take the dataset's samples in file order")
    p.add_argument("--no-oversample", action="store_true",
                   help="send only the samples there are when fewer than --num-prompts")
    p.add_argument("--num-warmups", type=int, default=0,
                   help="requests sent and awaited before the measured run, not counted")
    p.add_argument("--save-result", action="store_true",
                   help="write the run as JSON in vLLM's layout")
    p.add_argument("--save-detailed", action="store_true",
                   help="with --save-result: per-request lengths, TTFTs, ITLs, texts, errors")
    p.add_argument("--result-dir", default=None, help="where --save-result writes (default: .)")
    p.add_argument("--result-filename", default=None,
                   help="the --save-result file's name (default: vLLM's pattern)")
    p.add_argument("--label", default=None, help="the result's label (default: the backend)")
    p.add_argument("--metadata", nargs="*", default=None, metavar="KEY=VALUE",
                   help="fields added to the saved result")


@dataclass
class Result:
    ok: bool = False
    prompt_len: int = 0
    output_tokens: int = 0
    ttft: float = 0.0
    latency: float = 0.0
    itl: list = field(default_factory=list)
    error: str = ""
    text: str = ""


class BenchError(ValueError):
    """A flag, a value or a dataset file the bench cannot use: the message names it."""


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


async def one_request(client: httpx.AsyncClient, model: str, prompt: list[int] | str,
                      output_len: int, sampling: dict | None = None, *,
                      endpoint: str = "/v1/completions") -> Result:
    """One streamed request: a completions `prompt` (ids or text), or on
    /v1/chat/completions one user message whose content is `prompt` (text). Tokens are
    counted from the reply's usage (the chunks with text when the server sends none)."""
    import httpx      # here, not at the top: every foldserve command's parser imports this module
    chat = endpoint.endswith("/chat/completions")
    body = {"model": model, "max_tokens": output_len, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
            **(sampling or {})}
    if chat:
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        body["prompt"] = prompt
    res = Result(prompt_len=len(prompt) if isinstance(prompt, list) else 0)
    start = time.perf_counter()
    last = None
    chunks = 0
    pieces = []
    try:
        async with client.stream("POST", endpoint, json=body) as r:
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
                text = "".join(_chunk_text(c, chat) for c in obj.get("choices") or ())
                if text:
                    now = time.perf_counter()
                    if last is None:
                        res.ttft = now - start
                    else:
                        res.itl.append(now - last)
                    last = now
                    chunks += 1
                    pieces.append(text)
        res.latency = time.perf_counter() - start
        res.output_tokens = res.output_tokens or chunks
        res.text = "".join(pieces)
        res.ok = last is not None
        if not res.ok:
            res.error = "no text came back"
    except (httpx.HTTPError, json.JSONDecodeError) as e:
        res.error = f"{type(e).__name__}: {e}"
    return res


def _chunk_text(choice: dict, chat: bool) -> str:
    """A streamed choice's text: completions' `text`; a chat delta's content, or its
    reasoning (vLLM counts both toward TTFT and ITL)."""
    if not chat:
        return choice.get("text") or ""
    d = choice.get("delta") or {}
    return (d.get("reasoning_content") or d.get("reasoning") or "") + (d.get("content") or "")


# ------------------------------------------------------------------ flags and datasets
def resolve_api(backend: str | None, endpoint: str | None) -> tuple[str, str]:
    """(backend, endpoint) from either flag; vllm is openai; a pair that disagree is refused."""
    if backend is not None and backend not in BACKENDS:
        raise BenchError(f"--backend wants one of {', '.join(sorted(BACKENDS))}, got {backend!r}")
    if endpoint is not None and endpoint not in ENDPOINTS:
        raise BenchError(f"--endpoint wants one of {', '.join(sorted(ENDPOINTS))}, got {endpoint!r}")
    if backend is None:
        backend = ENDPOINTS[endpoint] if endpoint else "openai"
    if endpoint is None:
        endpoint = BACKENDS[backend]
    if BACKENDS[backend] != endpoint:
        raise BenchError(f"--backend {backend} sends to {BACKENDS[backend]}, not --endpoint "
                         f"{endpoint}: give one of them, or a pair that agree")
    return backend, endpoint


@dataclass
class Sample:
    prompt: list | str           # token ids (random) or text (custom, sharegpt)
    output_len: int | None       # None: the reply's length, measured by the server (sharegpt)
    reply: str = ""              # sharegpt: the recorded reply


def _lines(path: Path):
    """(line number, object) of a JSONL file, blank lines skipped."""
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    yield n, json.loads(line)
                except json.JSONDecodeError as e:
                    raise BenchError(f"--dataset-path {path} line {n}: not JSON ({e.msg})") from None


def load_custom(path: Path) -> list[str]:
    """The prompts of a JSONL file, one {"prompt": "..."} a line (vLLM's custom dataset)."""
    out = []
    for n, obj in _lines(path):
        if not isinstance(obj, dict) or not isinstance(obj.get("prompt"), str) or not obj["prompt"]:
            raise BenchError(f"--dataset-path {path} line {n}: wants an object with a non-empty "
                             "'prompt' string")
        out.append(obj["prompt"])
    return out


def load_sharegpt(path: Path) -> list[tuple[str, str]]:
    """(first turn, second turn) of each conversation with at least two turns: a JSON list (the
    ShareGPT files) or JSONL, each entry {"conversations": [{"from", "value"}, ...]}."""
    text = path.read_text(encoding="utf-8")
    if text.lstrip().startswith("["):
        try:
            entries = list(enumerate(json.loads(text), 1))
        except json.JSONDecodeError as e:
            raise BenchError(f"--dataset-path {path}: not JSON ({e.msg} at line {e.lineno})") from None
        where = "entry"
    else:
        entries, where = list(_lines(path)), "line"
    out = []
    for n, entry in entries:
        turns = entry.get("conversations") if isinstance(entry, dict) else None
        if not isinstance(turns, list) or len(turns) < 2:
            continue                                  # as vLLM: fewer than two turns, skipped
        pair = []
        for t in turns[:2]:
            v = t.get("value") if isinstance(t, dict) else None
            if not isinstance(v, str):
                raise BenchError(f"--dataset-path {path} {where} {n}: a turn without a 'value' string")
            pair.append(v)
        if pair[0]:
            out.append((pair[0], pair[1]))
    if not out:
        raise BenchError(f"--dataset-path {path}: no conversation of two turns or more "
                         "({\"conversations\": [{\"from\": \"human\", \"value\": ...}, ...]})")
    return out


def samples(args) -> list[Sample]:
    """The run's requests, --num-prompts of them (fewer with --no-oversample)."""
    n = args.requests
    if args.dataset_name == "random":
        outs = output_lens(n, args.output_len or OUTPUT_LEN, args.seed, args.random_range_ratio)
        ps = prompts(n, args.input_len, args.seed, range_ratio=args.random_range_ratio,
                     shared_prefix=args.shared_prefix_len)
        return [Sample(p, o) for p, o in zip(ps, outs)]
    path = Path(args.dataset_path)
    if not path.is_file():
        raise BenchError(f"--dataset-path {path}: no such file")
    if args.dataset_name == "custom":
        out_len = args.custom_output_len or args.output_len or OUTPUT_LEN
        pool = [Sample(p, out_len) for p in load_custom(path)]
        if not pool:
            raise BenchError(f"--dataset-path {path}: no prompt in it")
    else:
        out_len = args.sharegpt_output_len or args.output_len
        pool = [Sample(p, out_len, reply) for p, reply in load_sharegpt(path)]
    rng = random.Random(args.seed)
    if not args.disable_shuffle:
        rng.shuffle(pool)
    chosen = pool[:n]
    if len(chosen) < n and not args.no_oversample:    # as vLLM: drawn again at random
        chosen += rng.choices(pool, k=n - len(chosen))
    return chosen


def check_args(args) -> None:
    """Every flag's value, before anything is sent: a BenchError naming the flag."""
    parse_percentiles(args.percentiles)
    if not 0 <= args.random_range_ratio < 1:
        raise BenchError(f"--random-range-ratio wants [0, 1), got {args.random_range_ratio}")
    args.backend, args.endpoint = resolve_api(args.backend, args.endpoint)
    for flag, v, least in (("--num-prompts", args.requests, 1), ("--max-concurrency", args.concurrency, 1),
                           ("--input-len", args.input_len, 1), ("--output-len", args.output_len, 1),
                           ("--custom-output-len", args.custom_output_len, 1),
                           ("--sharegpt-output-len", args.sharegpt_output_len, 1),
                           ("--num-warmups", args.num_warmups, 0)):
        if v is not None and v < least:
            raise BenchError(f"{flag} wants an integer >= {least}, got {v}")
    if args.dataset_name not in DATASETS:
        raise BenchError(f"--dataset-name wants one of {', '.join(DATASETS)}, got {args.dataset_name!r}")
    if args.dataset_name == "random" and args.dataset_path is not None:
        raise BenchError("--dataset-path goes with --dataset-name custom or sharegpt "
                         "(the random dataset makes its own prompts)")
    if args.dataset_name != "random" and args.dataset_path is None:
        raise BenchError(f"--dataset-name {args.dataset_name} wants --dataset-path FILE")
    for flag, v in (("--result-dir", args.result_dir), ("--result-filename", args.result_filename),
                    ("--save-detailed", args.save_detailed or None), ("--metadata", args.metadata)):
        if v is not None and not args.save_result:
            raise BenchError(f"{flag} goes with --save-result")
    for kv in args.metadata or ():
        if "=" not in kv or not kv.split("=", 1)[0]:
            raise BenchError(f"--metadata wants KEY=VALUE, got {kv!r}")


async def _texts(client, model: str, ss: list[Sample]) -> None:
    """Random ids as text, for the chat endpoint: the server's own /detokenize."""
    for s in ss:
        if isinstance(s.prompt, list):
            r = await client.post("/detokenize", json={"model": model, "tokens": s.prompt})
            if r.status_code != 200:
                raise BenchError(f"the chat endpoint takes text: /detokenize of the random ids "
                                 f"answered HTTP {r.status_code}: {r.text[:200]}")
            s.prompt = r.json()["prompt"]


async def _reply_lens(client, model: str, ss: list[Sample]) -> None:
    """sharegpt without an output length: each recorded reply's tokens (the server's /tokenize)."""
    for s in ss:
        if s.output_len is None:
            r = await client.post("/tokenize", json={"model": model, "prompt": s.reply,
                                                     "add_special_tokens": False})
            if r.status_code != 200:
                raise BenchError(f"sharegpt's output lengths come from /tokenize, which answered "
                                 f"HTTP {r.status_code}: {r.text[:200]}; give --sharegpt-output-len")
            s.output_len = max(1, len(r.json()["tokens"]))


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
    """The run: check_args'd args -> the summary (with "_results", the per-request Results)."""
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
        ss = samples(args)
        if args.endpoint.endswith("/chat/completions"):
            await _texts(client, model, ss)
        await _reply_lens(client, model, ss)
        send = lambda i, s: one_request(client, model, s.prompt, s.output_len,  # noqa: E731
                                        sampling_fields(args, i), endpoint=args.endpoint)

        async def warm(i):
            async with gate:
                return await send(i, ss[i % len(ss)])

        warm_results = await asyncio.gather(*(warm(i) for i in range(args.num_warmups)))
        delays = arrival_delays(len(ss), args.request_rate, args.seed)
        start = time.perf_counter()

        async def gated(i):
            wait = start + delays[i] - time.perf_counter()
            if wait > 0:
                await asyncio.sleep(wait)
            async with gate:
                return await send(i, ss[i])

        results = await asyncio.gather(*(gated(i) for i in range(len(ss))))
        duration = time.perf_counter() - start
    rate = None if args.request_rate == float("inf") else args.request_rate  # JSON has no inf
    return {"model": model, "request_rate": rate, "backend": args.backend,
            "endpoint": args.endpoint, "dataset_name": args.dataset_name,
            "num_warmups": args.num_warmups,
            "warmups_failed": sum(not r.ok for r in warm_results),
            **summarize(list(results), duration, percentiles=parse_percentiles(args.percentiles),
                        slo_ttft_ms=args.slo_ttft, slo_tpot_ms=args.slo_tpot),
            "_results": list(results)}


def _pkey(q: float) -> str:
    return f"p{int(q)}" if float(q).is_integer() else f"p{q:g}"


def vllm_result(s: dict, args, date: str) -> dict:
    """The run in `vllm bench serve --save-result`'s layout (its field names and units:
    durations in s, latencies in ms, std the population's)."""
    results: list[Result] = s["_results"]
    done = [r for r in results if r.ok]
    label = args.label or args.backend
    out = {"date": date, "endpoint_type": args.backend, "backend": args.backend, "label": label,
           "model_id": s["model"], "tokenizer_id": s["model"], "num_prompts": len(results),
           **dict(kv.split("=", 1) for kv in args.metadata or ()),
           "request_rate": "inf" if s["request_rate"] is None else s["request_rate"],
           "burstiness": 1.0, "max_concurrency": args.concurrency,
           "duration": s["duration_s"], "completed": s["completed"], "failed": s["failed"],
           "total_input_tokens": s["total_input_tokens"],
           "total_output_tokens": s["total_output_tokens"],
           "request_throughput": s["request_throughput"],
           "request_goodput": s["goodput"] if (args.slo_ttft or args.slo_tpot) else None,
           "output_throughput": s["output_throughput"],
           "total_token_throughput": s["total_token_throughput"],
           "num_warmups": args.num_warmups, "dataset_name": args.dataset_name,
           "endpoint": args.endpoint}
    if args.save_detailed:
        out.update(input_lens=[r.prompt_len for r in results],
                   output_lens=[r.output_tokens if r.ok else 0 for r in results],
                   ttfts=[r.ttft if r.ok else 0.0 for r in results],
                   itls=[r.itl for r in results], generated_texts=[r.text for r in results],
                   errors=[r.error for r in results])
    per = {"ttft": [r.ttft for r in done], "tpot": [t for t in map(tpot, done) if t is not None],
           "itl": [g for r in done for g in r.itl], "e2el": [r.latency for r in done]}
    for name, xs in per.items():
        ms = [x * 1000.0 for x in xs]
        mean = sum(ms) / len(ms) if ms else 0.0
        out[f"mean_{name}_ms"] = mean
        out[f"median_{name}_ms"] = percentile(ms, 50)
        out[f"std_{name}_ms"] = math.sqrt(sum((x - mean) ** 2 for x in ms) / len(ms)) if ms else 0.0
        for q in parse_percentiles(args.percentiles):
            out[f"{_pkey(q)}_{name}_ms"] = percentile(ms, q)
    return out


def result_path(args, model: str, date: str) -> Path:
    """vLLM's name: {label}-{rate}qps-concurrency{N}-{model's last part}-{date}.json, or
    --result-filename; in --result-dir (made if missing) or the current directory."""
    rate = "inf" if args.request_rate == float("inf") else f"{args.request_rate}"
    name = args.result_filename or (f"{args.label or args.backend}-{rate}qps-concurrency"
                                    f"{args.concurrency}-{model.split('/')[-1]}-{date}.json")
    d = Path(args.result_dir) if args.result_dir else Path(".")
    return d / name


def save_result(s: dict, args) -> Path:
    date = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = result_path(args, s["model"], date)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(vllm_result(s, args, date), indent=2) + "\n")
    except OSError as e:
        raise BenchError(f"--save-result: cannot write {path}: {e.strerror or e}") from None
    return path


def run(args) -> int:
    import httpx
    # httpx logs every request at INFO ("HTTP Request: POST ... 200 OK"): a line a request here
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        check_args(args)
        if args.dataset_name != "random":
            samples(args)                 # the file's errors before any request is sent
    except (BenchError, ValueError) as e:
        print(f"bench: {e}", file=sys.stderr)
        return 2
    try:
        summary = asyncio.run(bench(args))
    except BenchError as e:
        print(f"bench: {e}", file=sys.stderr)
        return 1
    except (httpx.HTTPError, KeyError, IndexError, ValueError) as e:
        print(f"bench: cannot reach a model at {args.url}: {type(e).__name__}: {e}",
              file=sys.stderr)
        return 1
    if args.save_result:
        try:
            path = save_result(summary, args)
        except BenchError as e:
            print(f"bench: {e}", file=sys.stderr)
            return 1
        print(f"bench: result saved to {path}", file=sys.stderr)
    summary.pop("_results")
    print(json.dumps(summary) if args.json else table(summary, args), flush=True)
    return 0 if summary["completed"] else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="foldserve bench", description=__doc__.splitlines()[0])
    add_arguments(p)
    return run(p.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
