"""MTP drafts on the tiny checkpoints: acceptance (random NextN weights as the dummy gives
them, and the `echo` layer of tests/drafts/test_drafts_mtp.py), rounds and wall time beside
plain decoding, and 16 concurrent streams with the MTP layer's pass against an engine
without it. Run from the repository root:

    PYTHONPATH=$PWD:tests/drafts python docs/receipts/2026-12-05-drafts-mtp/measure.py

Copied from docs/receipts/2026-12-05-drafts-mtp/measure.py for the drafts-2 receipt and run
with --load (the 16-stream part only) or --solo (the other part only); --rounds N alternates N times (default 3), and each
line also gives the median ratio and every round's ratio.
"""
from __future__ import annotations

import os
import sys
import time

ROUNDS = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 3

sys.path.insert(0, "tests/drafts")

from server.drafts.policy import ROW_COST                     # noqa: E402
from server.engine.build import open_model                     # noqa: E402
from server.requests import SamplingParams as P                # noqa: E402
from drafts_run import serve                                   # noqa: E402
from test_drafts_exact import REP, cases                       # noqa: E402
from test_drafts_mtp import make_echo                          # noqa: E402


def run(eng, reqs, draft, **kw):
    t = time.perf_counter()
    out, s = serve(eng, reqs, draft=draft, source="mtp", **kw)
    return out, s, time.perf_counter() - t


def main(only_load: bool = False, only_solo: bool = False):
    for name in ([] if only_load else ("tiny-glm4moe-mtp", "tiny-deepseek3-mtp")):
        for weights in ("random", "echo"):
            eng = open_model(f"dummy:{name}", progress=False, mtp=True).engine
            if weights == "echo":
                make_echo(eng)
            for row_cost in (0.0, ROW_COST["cpu"]):
                plain, sp, tp = run(eng, cases(), False, together=False, streams=6)
                got, sd, td = run(eng, cases(), True, together=False, streams=6,
                                  row_cost=row_cost)
                assert got == plain
                n = sum(len(o) - 1 for o in plain)
                rc = "cpu(keys)" if callable(row_cost) else f"{row_cost:.2f}"
                print(f"{name} {weights:6s} row_cost {rc}: {n} tokens, rounds plain "
                      f"{sp.rounds} drafted {sd.rounds}; drafted {sd.draft_tokens_done}, "
                      f"accepted {sd.accepted_tokens_done} "
                      f"({sd.accepted_tokens_done / max(sd.draft_tokens_done, 1):.1%}); "
                      f"wall plain {tp:.2f} s, drafted {td:.2f} s ({tp / td:.2f}x)")
    if only_solo:
        return
    # under load: 16 streams; an engine without the MTP layer (draft off) vs with it (mtp)
    reqs = [(REP[i % 8:], P(max_tokens=48, temperature=0.0) if i % 2 else
             P(max_tokens=48, temperature=0.9, seed=i)) for i in range(16)]
    from dataclasses import replace
    from server.engine.engine import Engine
    from server.engine.weights.dummy import dummy_tensor
    from server.families.nextn import with_mtp
    from server.shapes.spec import shape
    for name, layers in (("tiny-glm4moe-mtp", 0), ("tiny-deepseek3-mtp", 0),
                         ("tiny-glm4moe-mtp", 24)):
        if layers:               # the same layer shape, 24 trunk layers: the pass is 1 of 25
            spec = replace(shape(name), n_layers=layers, name=f"{name}-L{layers}")
            base = Engine(spec, lambda n, s=spec: dummy_tensor(s, n))
            ms = with_mtp(spec)
            mtp = Engine(ms, lambda n, s=ms: dummy_tensor(s, n))
            name = spec.name
        else:
            base = open_model(f"dummy:{name}", progress=False).engine
            mtp = open_model(f"dummy:{name}", progress=False, mtp=True).engine
        times = {"off": [], "mtp": []}
        for _ in range(ROUNDS):                                  # alternating, this loaded host
            o1, _, t1 = run(base, reqs, False, streams=16, chunk=64)
            o2, s2, t2 = run(mtp, reqs, True, streams=16, chunk=64, row_cost=ROW_COST["cpu"])
            assert o1 == o2
            times["off"].append(t1)
            times["mtp"].append(t2)
        n = sum(len(o) - 1 for o in o1)
        a, b = min(times["off"]), min(times["mtp"])
        rs = [x / y for x, y in zip(times["off"], times["mtp"])]
        print(f"{name} 16 streams, {n} tokens: draft off (no MTP layer) {n / a:.0f} tok/s, "
              f"--draft mtp {n / b:.0f} tok/s ({a / b:.2f}x best of {ROUNDS} alternating; "
              f"median ratio {sorted(rs)[len(rs) // 2]:.2f}x, rounds "
              f"{', '.join(f'{r:.2f}' for r in rs)}; drafted {s2.draft_tokens_done}); "
              f"loadavg {os.getloadavg()}", flush=True)


if __name__ == "__main__":
    main(only_load="--load" in sys.argv, only_solo="--solo" in sys.argv)
