"""Per round, in process, each editing-set prompt drafted and plain (alternated): the verify
chunk's rows, the forward's ms, the drafts and how many were taken; then the same reply
replayed through Paced(NgramDrafts) with no model (receipt drafts36's simulate.py loop) and
the two round sequences compared (same chunks, same proposals?); then the ratio split:

  replay@CHUNK_COST   the reply's tokens over the replay's rounds charged CHUNK_COST
  forward ratio       plain's forward ms over drafted's (the same tokens)
  measured            decode tok/s drafted over plain (wall)

and the forward gap (replay@CHUNK_COST over the forward ratio) by chunk rows: each size's
measured ms against CHUNK_COST[rows] x plain's mean one-row ms.

  PYTHONPATH=$PWD python docs/receipts/2026-12-06-pace38/trace.py [--reps 1] [--prompts a,b] [--out F.json]
"""
import argparse
import json
import os
import sys
import time

ROOT = os.getcwd()
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))
sys.path.insert(0, os.path.join(ROOT, "tests", "drafts"))
import drafts_profile as DP  # noqa: E402

LOG = []


class Traced(DP.Timed):
    """Timed, and each RoundStep's chunk tokens kept (rows, ms, tokens of its one chunk)."""

    def run(self, step):
        from server.ranks.steps import RoundStep
        if not isinstance(step, RoundStep):
            return self.inner.run(step)
        t0 = time.perf_counter()
        out = self.inner.run(step)
        dt = time.perf_counter() - t0
        rows = sum(len(c.tokens) for c in step.chunks)
        self.log.append((rows, dt))
        LOG.append((rows, dt * 1e3, [list(c.tokens) for c in step.chunks]))
        return out


DP.Timed = Traced


def rounds_of(ids, log):
    """The decode rounds (after the first token) -> [(rows, ms, proposed, taken)]."""
    out, n = [], None
    for rows, ms, chunks in log:
        toks = chunks[0]
        if n is None:                     # the prompt's rounds, until a one-stream decode chunk
            if len(toks) <= 9 and toks[0] == ids[0]:
                n = 1
            else:
                continue
        assert toks[0] == ids[n - 1], (n, toks[:3])
        d = toks[1:]
        a = 0
        while a < len(d) and n + a < len(ids) and d[a] == ids[n + a]:
            a += 1
        out.append((rows, ms, len(d), a))
        n += a + 1
        if n >= len(ids):
            break
    return out


def replay(prompt, reply, T, K=8):
    """drafts36's simulate.run from the reply's first token on (the server drafts nothing in
    the prompt's round): [(proposed, taken)] a round."""
    import server.drafts.pace as P
    from server.drafts.ngram import NgramDrafts
    from server.drafts.policy import CHUNK_COST, cpu_row_cost
    src = P.Paced(NgramDrafts(prompt), cpu_row_cost, CHUNK_COST["cpu"])
    out, seq = reply[:1], []              # the first token comes from the prompt's round
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            src.verified(len(d), a)
        seq.append((len(d), a))
        out = reply[:len(out) + a + 1]
    return seq


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--tokens", type=int, default=400)
    ap.add_argument("--prompts", default=None)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from editing import EDIT_SET
    from server.drafts.policy import CHUNK_COST
    from server.engine.build import open_model
    T = CHUNK_COST["cpu"]
    m = open_model(None, progress=False)
    tok = m.tokenizer
    tasks = [t for t in EDIT_SET if a.prompts is None or t.name in a.prompts.split(",")]
    DP.one(m.engine, tok.encode(tasks[0].prompt()), 8, True, None, 8)      # warm
    res = []
    for rep in range(a.reps):
        for t in tasks:
            prompt = tok.encode(t.prompt())
            got = {}
            for d in ((False, True) if rep % 2 == 0 else (True, False)):
                LOG.clear()
                ids, r = DP.one(m.engine, prompt, a.tokens, d, None, 8)
                got[d] = (ids, r, rounds_of(ids, LOG))
            ids, rp, pr = got[False]
            idd, rd, dr = got[True]
            assert ids == idd, f"{t.name}: drafted != plain"
            # the replay of the decode phase: the reply after its first token, in the context
            # the server's n-gram index holds (the prompt and the first token)
            seq = replay(prompt, ids, T)
            srv = [(p, k) for _, _, p, k in dr]
            same = seq == srv
            plain_ms = sum(ms for *_, ms, _p, _k in [(x[0], x[1], 0, 0) for x in pr]) / len(pr)
            fwd_d = sum(x[1] for x in dr)
            fwd_p = sum(x[1] for x in pr)
            toks = len(ids) - 1
            rep_cost = sum(T[p] for p, _ in srv)
            by = {}
            for rows, ms, p, k in dr:
                b = by.setdefault(rows, {"n": 0, "ms": 0.0, "taken": 0})
                b["n"] += 1
                b["ms"] += ms
                b["taken"] += k
            for rows, b in by.items():
                b["mean_ms"] = b["ms"] / b["n"]
                b["cost_vs_plain"] = b["mean_ms"] / plain_ms
                b["table"] = T[rows - 1]
                b["excess_ms"] = b["ms"] - b["n"] * T[rows - 1] * plain_ms
            # one-row rounds of the drafted run, by the round before
            after = {"after_one": [], "after_chunk": []}
            for i in range(1, len(dr)):
                if dr[i][0] == 1:
                    after["after_one" if dr[i - 1][0] == 1 else "after_chunk"].append(dr[i][1])
            row = {"prompt": t.name, "rep": rep, "loadavg": os.getloadavg(),
                   "plain_tps": rp["decode_tps"], "drafted_tps": rd["decode_tps"],
                   "measured": rd["decode_tps"] / rp["decode_tps"],
                   "forward_ratio": fwd_p / fwd_d,
                   "replay_chunk_cost": toks / rep_cost,
                   "replay_same_rounds": same, "rounds": len(dr),
                   "drafted": sum(p for p, _ in srv), "taken": sum(k for _, k in srv),
                   "plain_row_ms": plain_ms, "plain_fwd_ms": fwd_p, "drafted_fwd_ms": fwd_d,
                   "plain_wall_ms": rp["wall_s"] * 1e3, "drafted_wall_ms": rd["wall_s"] * 1e3,
                   "by_rows": {str(k): v for k, v in sorted(by.items())},
                   "one_row_after_one_ms": sum(after["after_one"]) / max(1, len(after["after_one"])),
                   "one_row_after_chunk_ms": sum(after["after_chunk"]) / max(1, len(after["after_chunk"])),
                   "n_after": [len(after["after_one"]), len(after["after_chunk"])],
                   "ids": ids, "prompt_ids": prompt, "server_rounds": dr, "plain_rounds_ms": [x[1] for x in pr]}
            if not same:
                row["replay_rounds"] = seq
            res.append(row)
            print(json.dumps({k: v for k, v in row.items()
                              if k not in ("ids", "prompt_ids", "server_rounds", "plain_rounds_ms", "replay_rounds")}))
            sys.stdout.flush()
    if a.out:
        json.dump(res, open(a.out, "w"), indent=0)


if __name__ == "__main__":
    main()
