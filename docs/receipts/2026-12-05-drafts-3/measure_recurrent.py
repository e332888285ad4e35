"""What the replay costs on a recurrent family (issue 35's "a state a drafted position, or
a replay from the last kept state: measure both"): tiny-qwen3next through a real Scheduler,
the six requests of tests/drafts/test_drafts_exact.cases(), concurrent, drafts from the
oracle source of tests/drafts/test_drafts_recurrent.py (every refusal depth occurs) and from
n-grams: verify chunks, refused ones (each one copy back), rows replayed; and the copy
itself at the real families' state sizes (one copy a verify chunk for the replay; k + 1
state writes a chunk for a state kept at every drafted position).

  PYTHONPATH=$PWD:tests/drafts python docs/receipts/2026-12-05-drafts-3/measure_recurrent.py
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, "tests/drafts")
import kernels  # noqa: E402
kernels.init()
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, RoundStep  # noqa: E402
from server.step_driver import LocalDriver  # noqa: E402
from drafts_run import serve  # noqa: E402
from test_drafts_exact import cases  # noqa: E402
from test_drafts_recurrent import oracle  # noqa: E402


class Rec(LocalDriver):
    def __init__(self, e):
        super().__init__(e)
        self.rounds = []
        self.secs = 0.0

    def run(self, step):
        t0 = time.perf_counter()
        out = super().run(step)
        if isinstance(step, RoundStep):
            self.rounds.append(step)
            self.secs += time.perf_counter() - t0
        return out


eng = open_model("dummy:tiny-qwen3next", progress=False).engine
plain_rec = Rec(eng)
plain, _ = serve(eng, cases(), draft=False, streams=6, snap_rows=4, driver=plain_rec)
for label, src in (("oracle", oracle(plain, cases())), ("ngram", "ngram")):
    rec = Rec(eng)
    out, s = serve(eng, cases(), draft=True, streams=6, snap_rows=4, driver=rec, source=src)
    assert out == plain
    fed, replays, replay_rows, verifies = {}, 0, 0, 0
    for st in rec.rounds:
        for c in st.chunks:
            if c.logits == EVERY_ROW and len(c.tokens) > 1:
                verifies += 1
            if c.stream in fed and c.start < fed[c.stream]:
                replays += 1
                replay_rows += fed[c.stream] - c.start
            fed[c.stream] = c.start + len(c.tokens)
    rows = sum(len(c.tokens) for st in rec.rounds for c in st.chunks)
    prow = sum(len(c.tokens) for st in plain_rec.rounds for c in st.chunks)
    print(f"{label}: rounds {len(rec.rounds)} (plain {len(plain_rec.rounds)}), rows {rows} "
          f"(plain {prow}), verify chunks {verifies}, drafted {s.draft_tokens_done}, accepted "
          f"{s.accepted_tokens_done}, replays {replays} re-feeding {replay_rows} rows "
          f"({replay_rows / max(1, replays):.1f} a replay)")

# the copy: one stream's fixed part at the real families' sizes (float32); a timing: under
# the bench lock (--counts-only skips it)
for name, mib in (() if "--counts-only" in sys.argv else
                  (("Qwen3-Next-80B-A3B", 75.4), ("Kimi-Linear-48B-A3B", 42.8))):
    a = np.ones(int(mib * 2**20 / 4), np.float32)
    b = np.empty_like(a)
    ts = []
    for _ in range(9):
        t0 = time.perf_counter()
        np.copyto(b, a)
        ts.append(time.perf_counter() - t0)
    med = statistics.median(ts) * 1e3
    print(f"{name}: a state of {mib} MiB copied in {med:.1f} ms (median of 9); the replay: one "
          f"copy a verify chunk ({med:.1f} ms); a state at every drafted position, k = 8: 9 "
          f"writes ({9 * med:.1f} ms) and {9 * mib:.0f} MiB a verifying stream")
print("loadavg", os.getloadavg())
