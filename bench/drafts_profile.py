"""Where a drafted batch-1 request's time goes (issue 35's editing target), in process:
the default model, a real Scheduler + LocalDriver, one request at a time, drafts on
(n-gram, the server's CPU row cost unless --row-cost) against "draft": false, alternated.

Per run it splits the engine thread's wall time into stages:
  forward   driver.run of the RoundStep (the ranks' forward; rows and logits)
  build     build_round (the round's chunks; the n-gram lookup and the pace inside)
  take      take_round (arg-max / sampling, the verify walk, logprobs, emitting events)
  other     the loop's remainder (inbox, admission, metrics, finishing)
and, per round kind, the forward's ms by the verify chunk's rows (1 = a decode round),
the tokens a round yields, and the drafted / accepted counts. Per rep it prints the
split of the drafted/plain ratio (`split`): the forward's ratio (plain's forward ms over
drafted's, the same tokens) and the share of each side's wall outside the forward; the wall
ratio is their product, so a gap between the wall ratio and a replay of the reply at
measured chunk costs is either in the forward (the chunk costs) or outside it. HTTP
streaming and detokenisation are not in this process: bench/drafts.py measures them through
the server (its decode tok/s against this file's).

--staircase: the chunk costs themselves, in the scheduler's own rounds: a stream whose drafts
are k junk tokens (k = 0 .. --draft-tokens in turn, every one rejected, so each round
yields one token and the reply is plain's, checked), the forward's median ms by the chunk's
rows over its one-row rounds' median: a CHUNK_COST-shaped tuple, every size under the same
load, alternated round by round.

  python3 bench/drafts_profile.py [--reps 2] [--tokens 400] [--row-cost F] [--out FILE.json]
  python3 bench/drafts_profile.py --staircase [--reps 2] [--tokens 360]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "tests", "drafts"))


class Timed:
    """A LocalDriver whose RoundStep runs are timed, by the round's rows."""

    def __init__(self, inner, log):
        self.inner, self.log = inner, log

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def run(self, step):
        from server.ranks.steps import RoundStep
        if not isinstance(step, RoundStep):
            return self.inner.run(step)
        t0 = time.perf_counter()
        out = self.inner.run(step)
        self.log.append((sum(len(c.tokens) for c in step.chunks), time.perf_counter() - t0))
        return out


class Junk:
    """A stream's drafts for --staircase: k = 0, 1, .. cap, 0, .. junk tokens in turn (token
    0, never what the editing reply emits there: each is rejected), whatever the pace says;
    the rest of the Paced interface as a source that expects nothing to be taken."""

    def __init__(self, cap):
        self.cap, self.i = cap, 0

    def propose(self, out, k, load=None):
        n = self.i % (self.cap + 1)
        self.i += 1
        return (0,) * min(n, k)

    def expect(self, k):
        return 1.0

    def at(self, keys):
        pass

    def verified(self, proposed, accepted):
        pass


def staircase(by_rows: dict) -> tuple:
    """{chunk rows: {"median": ms}} -> each size's median over the one-row rounds' (rows 1 ..
    the largest, a size not measured None)."""
    base = by_rows[1]["median"]
    return tuple(round(by_rows[r]["median"] / base, 3) if r in by_rows else None
                 for r in range(1, max(by_rows) + 1))


def split(plain: dict, drafted: dict) -> dict:
    """Two runs of the same reply -> the wall ratio (drafted tok/s over plain's) as the
    forward's ratio times the outside-forward factor: wall = forward / (1 - outside share)."""
    fp, fd = plain["stages_ms"]["forward"], drafted["stages_ms"]["forward"]
    op = 1 - fp / (plain["wall_s"] * 1e3)
    od = 1 - fd / (drafted["wall_s"] * 1e3)
    return {"wall_ratio": round(drafted["decode_tps"] / plain["decode_tps"], 4),
            "forward_ratio": round(fp / fd, 4),
            "outside_share_plain": round(op, 4), "outside_share_drafted": round(od, 4),
            "outside_factor": round((1 - od) / (1 - op), 4)}


def one(engine, prompt, tokens, drafted, row_cost, draft_tokens, junk=False):
    import server.scheduler as S
    from server.drafts.policy import CHUNK_COST, ROW_COST
    from server.drafts.source import make_source
    from server.planner.admission import Admission
    from server.ranks.steps import PoolStep
    from server.requests import GenRequest, SamplingParams
    from server.step_driver import LocalDriver

    stages = defaultdict(float)
    fwd = []
    orig_build, orig_take = S.build_round, S.take_round

    def build(*a, **k):
        t0 = time.perf_counter()
        r = orig_build(*a, **k)
        stages["build"] += time.perf_counter() - t0
        return r

    def take(*a, **k):
        t0 = time.perf_counter()
        r = orig_take(*a, **k)
        stages["take"] += time.perf_counter() - t0
        return r

    context, page_rows, vw = 2048, 16, draft_tokens + 1
    pages = (context + vw + page_rows - 1) // page_rows
    adm = Admission(paged=True, pages=pages, page_rows=page_rows, streams=1, context=context,
                    verify_window=vw)
    engine.apply(PoolStep(True, pages, page_rows, (engine.page_bytes(page_rows),), 1,
                          context + vw - 1, verify=vw))
    drv = Timed(LocalDriver(engine), fwd)
    s = S.Scheduler(drv, adm, context=context, prefill_chunk=256,
                    drafts=make_source("ngram") if drafted else None, draft_tokens=draft_tokens,
                    draft_row_cost=ROW_COST["cpu"] if row_cost is None else row_cost,
                    draft_chunk_cost=CHUNK_COST["cpu"] if row_cost is None else None)
    S.build_round, S.take_round = build, take
    if junk:
        s._drafts_for = lambda req, st: Junk(draft_tokens)
    times = {}

    async def run():
        req = GenRequest("r0", list(prompt), SamplingParams(max_tokens=tokens, temperature=0.0))
        ids, first = [], None
        async for e in s.generate(req):
            if e.token_id is not None:
                ids.append(e.token_id)
                if first is None:
                    first = time.perf_counter()
                    times["rounds0"] = s.rounds
                    f0 = len(fwd)
                    times["fwd0"] = f0
                    times["stage0"] = dict(stages)
        times["last"] = time.perf_counter()
        times["first"] = first
        return ids

    try:
        s.start()
        ids = asyncio.run(run())
    finally:
        s.stop()
        S.build_round, S.take_round = orig_build, orig_take
    # the decode phase only: from the first token on
    wall = times["last"] - times["first"]
    dec = fwd[times["fwd0"]:]
    by_rows = defaultdict(list)
    for rows, t in dec:
        by_rows[rows].append(t * 1e3)
    st = {k: stages[k] - times["stage0"].get(k, 0.0) for k in ("build", "take")}
    st["forward"] = sum(t for _, t in dec)
    st["other"] = wall - st["forward"] - st["build"] - st["take"]
    return ids, {
        "drafted": drafted, "tokens": len(ids), "wall_s": wall,
        "decode_tps": (len(ids) - 1) / wall, "rounds": len(dec),
        "tokens_per_round": (len(ids) - 1) / max(1, len(dec)),
        "draft_tokens": s.draft_tokens_done, "accepted": s.accepted_tokens_done,
        "stages_ms": {k: v * 1e3 for k, v in st.items()},
        "stages_ms_per_round": {k: v * 1e3 / max(1, len(dec)) for k, v in st.items()},
        "forward_ms_by_rows": {r: {"n": len(v), "median": statistics.median(v)}
                               for r, v in sorted(by_rows.items())},
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--draft-tokens", type=int, default=8)
    ap.add_argument("--row-cost", type=float, default=None)
    ap.add_argument("--kind", choices=("editing", "prose"), default="editing")
    ap.add_argument("--staircase", action="store_true",
                    help="the forward by chunk rows with k = 0 .. draft-tokens junk drafts in turn")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    from editing import PROSE, chat_ids, editing_prompt
    from server.engine.build import open_model
    m = open_model(None, progress=False)
    tok = m.tokenizer
    prompt = tok.encode(editing_prompt()) if a.kind == "editing" else chat_ids(tok, PROSE)
    runs = []
    one(m.engine, prompt, 8, True, a.row_cost, a.draft_tokens)       # warm
    if a.staircase:
        return stairs(m.engine, prompt, a)
    for rep in range(a.reps):
        order = (False, True) if rep % 2 == 0 else (True, False)
        pair = {}
        for d in order:
            ids, r = one(m.engine, prompt, a.tokens, d, a.row_cost, a.draft_tokens)
            pair[d] = ids
            r["rep"] = rep
            r["loadavg"] = os.getloadavg()
            runs.append(r)
            print(json.dumps(r))
        print(f"rep {rep}: drafted ids == plain ids: {pair[True] == pair[False]}")
        sp = split(*(next(x for x in runs if x["rep"] == rep and x["drafted"] == d)
                     for d in (False, True)))
        print(f"rep {rep}: split {json.dumps(sp)}")
        assert pair[True] == pair[False], "drafted != plain"
    p = [r["decode_tps"] for r in runs if not r["drafted"]]
    d = [r["decode_tps"] for r in runs if r["drafted"]]
    ratios = []
    for rep in range(a.reps):
        r = {x["drafted"]: x["decode_tps"] for x in runs if x["rep"] == rep}
        ratios.append(r[True] / r[False])
    print(f"plain {p} drafted {d} ratios {ratios}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"runs": runs, "ratios": ratios, "kind": a.kind,
                       "row_cost": a.row_cost}, f, indent=1)
    return 0


def stairs(engine, prompt, a) -> int:
    """--staircase: per rep a junk-drafted run (the ids checked against a plain one), the
    forward by chunk rows over its one-row rounds."""
    plain, _ = one(engine, prompt, a.tokens, False, a.row_cost, a.draft_tokens)
    out = []
    for rep in range(a.reps):
        ids, r = one(engine, prompt, a.tokens, True, a.row_cost, a.draft_tokens, junk=True)
        assert ids == plain, "junk-drafted != plain"
        r["rep"], r["loadavg"], r["staircase"] = rep, os.getloadavg(), staircase(
            r["forward_ms_by_rows"])
        out.append(r)
        print(json.dumps({k: r[k] for k in ("rep", "loadavg", "forward_ms_by_rows")}))
        print(f"rep {rep}: staircase {r['staircase']} (one-row rounds "
              f"{r['forward_ms_by_rows'][1]['median']:.2f} ms); ids == plain")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"staircase_runs": out, "kind": a.kind}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
