"""Class bounds tried on the replay (pace.Paced._propose_classed with k bounds: the class is
how many bounds the match reaches), each with the pace reading CC and TR, charged TR1.
  PYTHONPATH=$PWD python docs/receipts/2026-12-06-pace38/classes_try.py"""
import sys, os
sys.path.insert(0, os.getcwd()); sys.path.insert(0, 'docs/receipts/2026-12-06-pace38')
import replay as RP
import server.drafts.pace as P
orig = P.Paced._propose_classed
def mk(bounds):
    def f(self, out, k, load):
        d = tuple(self.source.propose(out, k)) if k >= 1 else ()
        if not d:
            self.idle += 1
            return ()
        m = self.source.match
        self._use(sum(m >= b for b in bounds))
        n = self.best(len(d), load)
        if n == 0:
            self.idle += 1
            if self.idle < P.PROBE:
                return ()
            n = 1
        self.idle = 0
        return d[:n]
    return f
for bounds in ((4,), (4, 8), (4, 16), (4, 8, 16), (3, 8), (4, 12)):
    P.Paced._propose_classed = mk(bounds)
    for pn, pt in (("CC", RP.CC), ("TR", RP.TR)):
        RP.table(f"{bounds} pace {pn} / TR1", pt, RP.TR1)
