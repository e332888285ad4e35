"""The pace replayed on the recorded plain replies (replies_ids.json here: the editing set and
prose, in process; drafts36's replies_more.json: 4 cut pool.py prompts, 6 chat, prose2, code)
through the real Paced(NgramDrafts), from each reply's first token on as the server drafts:
the pace reading table P, each round charged table C (one-row rounds of plain = 1.0).

  CC  policy.CHUNK_COST (what the pace reads now)
  TR  what the chunks cost in the drafted runs of trace-1.json, over plain's one-row round
      (rows 1-5, 9 measured: the n-weighted mean over the 5 prompts x 2 reps; 6-8, which the
      pace never picks there, between 5 and 9 by staircase-1's shape)
  TR1 TR with a drafted run's one-row round at its measured 1.041 (the charge only)

Each under both class rules: main's two (pace.MID out of reach: a match of LONG or more is
one class) and this branch's three (pace.MID = 8: 4-7 a class of its own).

  PYTHONPATH=$PWD python docs/receipts/2026-12-06-pace38/replay.py
"""
import json
import math
import os
import sys

sys.path.insert(0, os.getcwd())
import server.drafts.pace as P  # noqa: E402
from server.drafts.ngram import NgramDrafts  # noqa: E402
from server.drafts.policy import CHUNK_COST, cpu_row_cost  # noqa: E402

D = os.path.dirname(os.path.abspath(__file__))
CC = CHUNK_COST["cpu"]
TR = (1.0, 1.253, 1.495, 1.789, 2.121, 2.39, 2.84, 3.01, 3.184)
TR1 = (1.041,) + TR[1:]


def run(prompt, reply, pace_table, charge, K=8):
    src = P.Paced(NgramDrafts(prompt), cpu_row_cost, pace_table)
    out, cost, rounds, dr, acc, sizes = reply[:1], 0.0, 0, 0, 0, {}
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        cost += charge[len(d)]
        sizes[len(d) + 1] = sizes.get(len(d) + 1, 0) + 1
        rounds += 1
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            src.verified(len(d), a)
        dr, acc = dr + len(d), acc + a
        out = reply[:len(out) + a + 1]
    return (len(reply) - 1) / cost, rounds, dr, acc, dict(sorted(sizes.items()))


def geo(xs):
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


R = json.load(open(f"{D}/replies_ids.json"))
M = json.load(open(f"{D}/../2026-12-05-drafts36/replies_more.json"))
SET = ["pool.py", "admission.py", "layout.py", "plan.py", "prompt_cache.py"]
OTHERS = [k for k in M if not k.startswith("edit")] + ["prose"]
CUTS = [k for k in M if k.startswith("edit")]
ALL = {**{k: R[k] for k in R}, **M}


def table(label, pace_table, charge):
    v = {n: run(*ALL[n], pace_table, charge) for n in SET + CUTS + OTHERS}
    print(f"{label:40s} " + " ".join(f"{v[n][0]:.3f}" for n in SET)
          + f" | set geo {geo([v[n][0] for n in SET]):.3f} cuts geo {geo([v[n][0] for n in CUTS]):.3f}"
          f" | prose {v['prose'][0]:.3f} others geo {geo([v[n][0] for n in OTHERS]):.3f}")
    return v


if __name__ == "__main__":
    mid = P.MID
    print(f"{'pace reads / charged':40s} " + " ".join(f"{n[:9]:>5s}" for n in SET))
    for cname, charge in (("CC", CC), ("TR", TR), ("TR1", TR1)):
        for pname, pt in (("CC", CC), ("TR", TR)):
          for rule, P.MID in (("2 classes", 10 ** 9), (f"3 classes, MID {mid}", mid)):
            v = table(f"{rule}: pace {pname} / {cname}", pt, charge)
            if cname == "TR1":
                for n in SET:
                    print(f"    {n:16s} rounds {v[n][1]} drafted {v[n][2]} taken {v[n][3]} chunk rows {v[n][4]}")
