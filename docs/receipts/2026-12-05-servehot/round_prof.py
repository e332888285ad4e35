"""The scheduler's own work a b1 decode round (no model): _drain + _admit + _round with a
driver that returns a [1, V] float32 row at once, and an emit sink that does nothing."""
import sys, time, cProfile, pstats
import numpy as np
from server.planner.admission import Admission
from server.ranks.steps import RoundStep
from server.requests import GenRequest, SamplingParams
from server.scheduler import Scheduler
from server.host_sampling import HostSampling

V = 151936
rows = np.random.default_rng(0).standard_normal((8, V)).astype(np.float32)

class Drv(HostSampling):
    ranks, ok = 1, True
    def __init__(self):
        super().__init__("cpu"); self.sampling = self; self.n = 0
    def run(self, step):
        if isinstance(step, RoundStep):
            self.n += 1
            return rows[self.n % 8: self.n % 8 + 1]
    def check(self): pass
    def close(self): pass

class Loop:
    def call_soon_threadsafe(self, fn, *a): pass
class Sink:
    def put_nowait(self, ev): pass

adm = Admission(paged=True, pages=4096, page_rows=16, streams=4, context=8192)
s = Scheduler(Drv(), adm, context=8192, prefill_chunk=256)
s.sinks["a"] = (Loop(), Sink())
s.inbox.put(("new", GenRequest("a", list(range(100, 164)), SamplingParams(max_tokens=5000, temperature=0.0, ignore_eos=True))))
def one():
    s._drain(block=False); s._admit(); s._round()
for _ in range(20): one()
N = 2000
t = time.perf_counter()
for _ in range(N): one()
print(f"{(time.perf_counter()-t)/N*1e6:.1f} us a round (b1 decode, V {V})")
if len(sys.argv) > 1:
    p = cProfile.Profile(); p.enable()
    for _ in range(N): one()
    p.disable(); pstats.Stats(p).sort_stats("tottime").print_stats(25)
