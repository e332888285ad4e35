"""The n-gram drafter replayed on the recorded editing reply (docs/receipts/2026-12-05-drafts-3/
replies.json, its simulate.py's method) with the chunk costs measured in sizes_ab.txt (one
stream's chunk of 1..9 rows at 1,000 keys, in one-row rounds, the mean of the two runs of
each tree): the speed-up over plain each draft cap and pace gives on each tree's costs.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts35/simulate.py
"""
import json
import sys

sys.path.insert(0, ".")
from server.drafts.ngram import NgramDrafts  # noqa: E402
from server.drafts.pace import Paced  # noqa: E402
from server.drafts.policy import cpu_row_cost  # noqa: E402

D = "docs/receipts/2026-12-05-drafts35"
REPLIES = json.load(open("docs/receipts/2026-12-05-drafts-3/replies.json"))


def table(side, runs):
    rs = [json.load(open(f"{D}/sizes_{side}_{n}.json"))["cases"] for n in runs]
    return {k: sum(r[f"1x{k}"]["median_ms"] / r["1x1"]["median_ms"] for r in rs) / len(rs)
            for k in range(1, 10)}


TABLES = {"base": table("base", (1, 3)), "drafts35": table("new", (2, 4))}


def run(prompt, reply, pace_cost, T, K=8):
    src = Paced(NgramDrafts(prompt), pace_cost)
    out, cost, rounds, dr, acc = [], 0.0, 0, 0, 0
    while len(out) < len(reply):
        src.at(len(prompt) + len(out))
        k = min(K, len(reply) - len(out) - 1)
        d = src.propose(out, k) if k > 0 else ()
        cost += T[1 + len(d)]
        rounds += 1
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            src.verified(len(d), a)
        dr += len(d)
        acc += a
        out = reply[:len(out) + a + 1]
    return len(reply) / cost, rounds, dr, acc


for side, T in TABLES.items():
    print(side, "chunk cost (one-row rounds):", {k: round(v, 2) for k, v in T.items()})
    for name, (p, r) in REPLIES.items():
        for label, pc in (("pace cpu(keys)", cpu_row_cost), ("pace 0.15", 0.15), ("pace 0.10", 0.10)):
            for K in (5, 8):
                sp, rounds, dr, acc = run(p, r, pc, T, K)
                print(f"  {name:7s} {label:15s} K<={K}: {sp:.2f}x  rounds {rounds} drafted {dr} accepted {acc}")
