import sys, os, collections
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
from server.drafts.ngram import NgramDrafts
def rows(prompt, reply, K=8):
    src = NgramDrafts(prompt)
    out = reply[:1]; prev = None; res = []
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        d = src.propose(out, k) if k > 0 else ()
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            res.append((src.match, len(d), a, prev))
            prev = (a == len(d))
        # advance as if drafting all (oracle path: accepted a+1)
        out = reply[:len(out) + a + 1]
    return res
def summarize(names, label):
    tab = collections.defaultdict(lambda: [0,0,0])
    for n in names:
        for m, L, a, prev in rows(*R.ALL[n]):
            key = (min(m,16) if m < 8 else (8 if m < 12 else (12 if m<16 else 16)), prev)
            t = tab[key]; t[0] += 1; t[1] += a; t[2] += L
    print(label)
    for key in sorted(tab, key=lambda k: (k[0], str(k[1]))):
        c, a, L = tab[key]
        print(f"  m {key[0]:2d} prevfull {str(key[1]):5s} n {c:4d} mean taken {a/c:.2f} of {L/c:.2f} rate {a/max(L,1):.2f}")
summarize(R.SET, "SET")
summarize(R.CUTS + R.OTHERS, "OTHERS")
print("distribution of taken (full 8 proposals)")
for names, lab in ((R.SET, "SET"), (R.CUTS+R.OTHERS, "OTHERS")):
    for cls, lo, hi in (("2-3", 2, 4), ("4-7", 4, 8), ("8+", 8, 99)):
        h = collections.Counter()
        for n in names:
            for m, L, a, prev in rows(*R.ALL[n]):
                if lo <= m < hi and L == 8: h[a] += 1
        tot = sum(h.values())
        # conditional continuation at each position
        cond = []
        for j in range(8):
            reach = sum(c for a, c in h.items() if a >= j)
            cont = sum(c for a, c in h.items() if a >= j+1)
            cond.append(cont / reach if reach else float('nan'))
        print(lab, cls, tot, [h[i] for i in range(9)], "cond", " ".join(f"{c:.2f}" for c in cond))
