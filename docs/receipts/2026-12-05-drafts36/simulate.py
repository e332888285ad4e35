"""The n-gram drafts replayed on recorded greedy replies of the default model (the editing
and prose replies of docs/receipts/2026-12-05-drafts-3/replies.json, and the held-out ones
of replies_more.json here, record_more.py) through the real Paced(NgramDrafts), each
round charged a measured chunk cost (in one-row rounds): Tq, the in-process quiet forward by
the chunk's rows (receipt 2026-12-05-drafts35, profile_ab.txt), Tp, the table the pace now
reads (policy.CHUNK_COST: Tq's mean with profile_new1.txt rep 1 here), and Tv,
bench/verify_rows.py here (sizes_1/2.txt, the mean of the two). Before: the pace of main (one
record a stream, a linear row cost); after: one record a match class (pace.LONG) and the
chunk staircase (policy.CHUNK_COST). Also the oracles on the editing reply: every round
drafting exactly what the model then emits, where the context holds it.

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-drafts36/simulate.py
"""
import json
import math
import sys

sys.path.insert(0, ".")
import server.drafts.pace as P  # noqa: E402
from server.drafts.ngram import NgramDrafts  # noqa: E402
from server.drafts.policy import CHUNK_COST, cpu_row_cost  # noqa: E402

D = "docs/receipts/2026-12-05-drafts36"
R = json.load(open("docs/receipts/2026-12-05-drafts-3/replies.json"))
R.update(json.load(open(f"{D}/replies_more.json")))
TQ = (1.0, 1.15, 1.44, 1.58, 1.79, 2.12, 2.74, 2.71, 2.98)
TP = CHUNK_COST["cpu"]
TV = (1.0, 1.07, 1.28, 1.47, 1.71, 1.93, 2.46, 2.66, 2.82)


def run(prompt, reply, T, classed, chunk, K=8):
    src = P.Paced(NgramDrafts(prompt), cpu_row_cost, chunk)
    src.classed = classed
    out, cost, rounds, dr, acc = [], 0.0, 0, 0, 0
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        cost += T[len(d)]
        rounds += 1
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            src.verified(len(d), a)
        dr, acc = dr + len(d), acc + a
        out = reply[:len(out) + a + 1]
    return len(reply) / cost, rounds, dr, acc


def oracle(prompt, reply, T, K=8, cands_only=False):
    """Each round drafts the longest run of the coming reply that the context holds (any
    start; cands_only: only starts after an earlier occurrence of the last 2 tokens)."""
    i, cost, rounds = 0, 0.0, 0
    while i < len(reply):
        ctx, best = prompt + reply[:i], 0
        k = min(K, len(reply) - i - 1)
        for j in range(1 if cands_only else 0, len(ctx)):
            if cands_only and not (j >= 2 and ctx[j - 2:j] == ctx[-2:] and j < len(ctx)):
                continue
            L = 0
            while L < k and j + L < len(ctx) and ctx[j + L] == reply[i + L]:
                L += 1
            best = max(best, L)
        cost += T[best]
        rounds += 1
        i += best + 1
    return len(reply) / cost, rounds


names = list(R)
for tn, T in (("Tq", TQ), ("Tp", TP), ("Tv", TV)):
    print(f"chunk costs {tn}: {T}")
    print(f"  {'':26s}" + " ".join(f"{n[:9]:>9s}" for n in names) + "  geo(edits) geo(others)")
    for lab, classed, chunk in (("before (main's pace)", False, None),
                                ("match classes", True, None),
                                ("chunk staircase Tp", False, TP),
                                ("classes + staircase Tv", True, TV),
                                ("after: classes + Tp", True, TP)):
        v = [run(*R[n], T, classed, chunk) for n in names]
        sp = [x[0] for x in v]
        ge = math.exp(sum(math.log(x) for n, x in zip(names, sp) if n.startswith("edit")) / 5)
        go = math.exp(sum(math.log(x) for n, x in zip(names, sp) if not n.startswith("edit")) / 9)
        print(f"  {lab:26s}" + " ".join(f"{x:8.2f}x" for x in sp) + f"  {ge:.3f} {go:.3f}")
        e = v[0]
        print(f"  {'':26s}editing: {e[1]} rounds, {e[2]} drafted, {e[3]} taken")
    p, r = R["edit"]
    for co in (False, True):
        sp, rounds = oracle(p, r, T, cands_only=co)
        print(f"  oracle{' (2-gram starts)' if co else ''} on editing: {sp:.2f}x in {rounds} rounds")

# how often a draft is taken, by the match length of its proposal (NgramDrafts.match), on
# the editing reply with every round drafting 8 (no pace): what the pace's classes key on
p, r = R["edit"]
src, out, by = NgramDrafts(p), [], {}
while len(out) < len(r):
    k = min(8, len(r) - len(out) - 1)
    d = src.propose(out, k) if k > 0 else ()
    a = 0
    while a < len(d) and d[a] == r[len(out) + a]:
        a += 1
    if d:
        m = src.match
        b = "2-3" if m < 4 else "4-7" if m < 8 else "8-15" if m < 16 else "16+"
        x = by.setdefault(b, [0, 0, 0])
        x[0], x[1], x[2] = x[0] + 1, x[1] + len(d), x[2] + a
    out = r[:len(out) + a + 1]
print("editing, drafts of 8 every round, by match length:")
for b in ("2-3", "4-7", "8-15", "16+"):
    n, dr, acc = by.get(b, (0, 0, 0))
    print(f"  match {b:5s}: {n:3d} proposals, {dr:3d} drafted, {acc:3d} taken ({acc / max(dr, 1):.0%})")
