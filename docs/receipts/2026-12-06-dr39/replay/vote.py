import sys, os, collections
sys.argv=[sys.argv[0]]
sys.path.insert(0, os.getcwd()+"/docs/receipts/2026-12-06-pace38")
import replay as R
import server.drafts.pace as P
import server.drafts.ngram as NG
from server.drafts.policy import cpu_row_cost

class Vote(NG.NgramDrafts):
    TIE = "latest"
    def __init__(self, prompt_ids):
        self.nxt = {}     # g -> {next token: [count, first end, latest end]}
        super().__init__(prompt_ids)
    def _index(self):
        t, latest, first, nxt = self.toks, self.latest, self.first, self.nxt
        for e in range(self.done, len(t) - 1):
            for n in range(NG.MIN_N, NG.MAX_N + 1):
                if e - n + 1 < 0: break
                g = tuple(t[e - n + 1:e + 1])
                latest[g] = e
                first.setdefault(g, e)
                c = nxt.setdefault(g, {}).get(t[e + 1])
                if c is None: nxt[g][t[e + 1]] = [1, e, e]
                else: c[0] += 1; c[2] = e
        self.done = max(self.done, len(t) - 1)
    def propose(self, out, k):
        if len(out) > self.reply:
            self.toks += out[self.reply:]; self.reply = len(out); self._index()
        t = self.toks; self.match = 0
        if k < 1: return ()
        end = len(t) - 1
        for n in range(min(NG.MAX_N, len(t)), NG.MIN_N - 1, -1):
            g = tuple(t[len(t) - n:])
            cs = self.nxt.get(g)
            if cs:
                c = max(cs.values(), key=lambda v: (v[0], v[2]))
                e = c[2]
                if end - e < k: e = c[1]
                m = n
                while m < NG.MATCH_CAP and e - m >= 0 and t[e - m] == t[end - m]:
                    m += 1
                self.match = m
                return tuple(t[e + 1:e + 1 + k])
        return ()

def run(src_cls, prompt, reply, pt, ch, K=8):
    src = P.Paced(src_cls(prompt), cpu_row_cost, pt)
    out, cost = reply[:1], 0.0
    while len(out) < len(reply):
        k = min(K, len(reply) - len(out) - 1)
        src.at(len(prompt) + len(out))
        d = src.propose(out, k) if k > 0 else ()
        cost += ch[len(d)]
        a = 0
        while a < len(d) and d[a] == reply[len(out) + a]: a += 1
        if d: src.verified(len(d), a)
        out = reply[:len(out) + a + 1]
    return (len(reply) - 1) / cost
def tab(label, cls, pt=R.CC, ch=R.TR1):
    v = {n: run(cls, *R.ALL[n], pt, ch) for n in R.SET + R.CUTS + R.OTHERS}
    print(f"{label:20s} " + " ".join(f"{v[n]:.3f}" for n in R.SET) + f" | set {R.geo([v[n] for n in R.SET]):.3f} cuts {R.geo([v[n] for n in R.CUTS]):.3f} prose {v['prose']:.3f} others {R.geo([v[n] for n in R.OTHERS]):.3f}")
    print("   others:", " ".join(f"{n[:10]}={v[n]:.3f}" for n in R.CUTS + R.OTHERS))
    return v
if __name__ == "__main__":
    tab("main", NG.NgramDrafts)
    tab("vote", Vote)
    tab("vote pace TR1", Vote, R.TR1)
