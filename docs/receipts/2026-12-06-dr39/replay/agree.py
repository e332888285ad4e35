import sys, os, collections
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
from server.drafts.ngram import NgramDrafts, MIN_N, MAX_N
def feats(src, k):
    # recompute: the n-gram chosen, all earlier occurrences' next tokens
    t = src.toks
    for n in range(min(MAX_N, len(t)), MIN_N - 1, -1):
        g = tuple(t[len(t)-n:])
        if g in src.latest:
            nxt = collections.Counter(t[e+1] for e in range(n-1, len(t)-1) if tuple(t[e-n+1:e+1]) == g)
            return n, nxt
    return None, None
def rows(prompt, reply, K=8):
    src = NgramDrafts(prompt)
    out = reply[:1]; res = []
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        d = src.propose(out, k) if k > 0 else ()
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]:
            a += 1
        if d:
            n, nxt = feats(src, k)
            top = nxt[d[0]] / sum(nxt.values())
            res.append((src.match, n, sum(nxt.values()), top, a, len(d)))
        out = reply[:len(out) + a + 1]
    return res
for names, lab in ((R.SET, "SET"), (R.CUTS+R.OTHERS, "OTHERS")):
    tab = collections.defaultdict(lambda: [0,0,0])
    for nm in names:
        for m, n, occ, top, a, L in rows(*R.ALL[nm]):
            cls = "2-3" if m < 4 else ("4-7" if m < 8 else "8+")
            key = (cls, "single" if occ == 1 else ("unanimous" if top == 1 else ("majority" if top > 0.5 else "minority")))
            t = tab[key]; t[0] += 1; t[1] += (a >= 1); t[2] += a
    print(lab)
    for key in sorted(tab):
        c, a1, a = tab[key]
        print(f"  {key[0]:4s} {key[1]:10s} n {c:4d} P(first) {a1/c:.2f} mean taken {a/c:.2f}")
