"""Crew rounds vs prange regions on one loaded engine, alternating in one process (the same
load for both): kernels/blocks_vec.CREW toggled between rounds of batch-1 decode (tg: a
1-token prompt then N greedy steps) and of a prefill, on a bench file. Same bytes either way
(tests/model/test_crew_cpu.py); the greedy tokens of each mode are printed equal.

    PYTHONPATH=$PWD python docs/receipts/2026-12-05-moe-kernels/crew_ab.py FILE.gguf [--rounds 4]
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("gguf")
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--prefill", type=int, default=128)
    a = ap.parse_args()
    from bench.moe_cpu import Foldserve
    from kernels import blocks_vec
    f = Foldserve(Path(a.gguf), 2)
    res = {True: [], False: []}
    for r in range(a.rounds):
        for mode in ((True, False) if r % 2 == 0 else (False, True)):
            blocks_vec.CREW = mode
            tg, _ = f.decode(1, a.steps)
            pp, _ = f.prefill(a.prefill)
            res[mode].append((tg, pp))
            print(f"round {r + 1} {'crew  ' if mode else 'prange'}: tg {tg:6.2f} tok/s  pp{a.prefill} {pp:7.2f} tok/s"
                  f"  load {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    for mode in (True, False):
        t = np.array(res[mode])
        print(f"{'crew  ' if mode else 'prange'} median tg {np.median(t[:, 0]):.2f} pp {np.median(t[:, 1]):.2f}")
    c, p = np.array(res[True]), np.array(res[False])
    print(f"crew / prange per round: tg {[round(float(x), 2) for x in c[:, 0] / p[:, 0]]} "
          f"pp {[round(float(x), 2) for x in c[:, 1] / p[:, 1]]}")


if __name__ == "__main__":
    main()
