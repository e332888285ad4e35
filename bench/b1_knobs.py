"""Batch-1 decode at the engine on a GGUF with knobs that change no byte, alternated block by
block in one process (the same loaded weights, the same pages), ms a step each: for A/B of
where a product runs, before a fresh-process A/B through the server (bench/cpu_serve.py).

Knobs (comma lists of name=value; `base` = the tree's settings):
  solo=N       kernels/kquant_cpu.SOLO_ROWS (0: every product past CREW_SERIAL_MACS on the crew)
  solob=N      kernels/kquant_cpu.SOLO_BYTES
  serial=N     kernels/blocks_vec.CREW_SERIAL_MACS
  gdn=N        kernels/gdn_cpu.CREW_SERIAL (state elements x positions at most on the caller alone)
  head=gguf    the LM head read from the GGUF's own map (a second map of the file: the same
               page-cache pages the loader's map had) instead of the engine's copy
               (kernels/blocks.hugepage_copy); head=held the engine's

    PYTHONPATH=$PWD python -m bench.b1_knobs FILE.gguf [--threads 2] [--steps 16] [--rounds 6]
        [--sets base,solo=0]

Each round runs every set for --steps decode steps (greedy, the logits' argmax fed back, one
stream), in order; a set's number is the median over rounds of its ms a step. The logits are
compared across sets (they must be equal: the knobs move no byte).
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import server  # noqa: F401,I001  (OPENBLAS_NUM_THREADS=1 before numpy, as serve runs)
import numpy as np


HEADS: dict = {}         # "held" / "gguf" -> the head's Blocks; MODEL: the engine's Model
MODEL: list = []


def apply(setting: str, saved: dict):
    from kernels import blocks_vec, gdn_cpu, kquant_cpu
    for k, v in saved.items():
        setattr(*k, v)
    if HEADS:
        MODEL[0].w.lm_head = HEADS["held"]
    if setting == "base":
        return
    for kv in setting.split("+"):
        name, val = kv.split("=")
        if name == "head":
            MODEL[0].w.lm_head = HEADS[val]
            continue
        mod, attr = {"solo": (kquant_cpu, "SOLO_ROWS"), "solob": (kquant_cpu, "SOLO_BYTES"),
                     "serial": (blocks_vec, "CREW_SERIAL_MACS"),
                     "gdn": (gdn_cpu, "CREW_SERIAL")}[name]
        setattr(mod, attr, int(val))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--sets", default="base,solo=0")
    a = ap.parse_args(argv)
    import kernels
    kernels.init()
    from bench.moe_cpu import Foldserve
    from kernels import blocks_vec, gdn_cpu, kquant_cpu
    from server.ranks.steps import Chunk, RoundStep
    saved = {(kquant_cpu, "SOLO_ROWS"): kquant_cpu.SOLO_ROWS,
             (kquant_cpu, "SOLO_BYTES"): kquant_cpu.SOLO_BYTES,
             (blocks_vec, "CREW_SERIAL_MACS"): blocks_vec.CREW_SERIAL_MACS,
             (gdn_cpu, "CREW_SERIAL"): gdn_cpu.CREW_SERIAL}
    f = Foldserve(Path(a.gguf), a.threads)
    MODEL.append(f.eng.model)
    if any("head=" in s for s in a.sets.split(",")):
        from kernels.blocks import Blocks
        from server.engine.weights.gguf_file import GGUFFile
        held = f.eng.model.w.lm_head
        t = next(t for t in GGUFFile(a.gguf).tensors if t.name == "output.weight")
        HEADS.update(held=held, gguf=Blocks(held.kind, held.rows, held.cols,
                                            t.data.reshape(held.rows, -1)))
    sets = a.sets.split(",")
    print(f"load {os.getloadavg()}; sets {sets}", flush=True)
    ms = {s: [] for s in sets}
    steps = {s: [] for s in sets}           # every step's ms
    ref = None
    for r in range(a.rounds):
        for s in sets:
            apply(s, saved)
            f._begin(0)
            lg = f.eng.apply(RoundStep((Chunk(0, 0, (1,)),)))
            nxt = int(np.argmax(lg[0]))
            got = []
            t = time.perf_counter()
            for k in range(a.steps):
                t1 = time.perf_counter()
                lg = f.eng.apply(RoundStep((Chunk(0, 1 + k, (nxt,)),)))
                nxt = int(np.argmax(lg[0]))
                steps[s].append((time.perf_counter() - t1) * 1e3)
                got.append(lg[0].tobytes())
            ms[s].append((time.perf_counter() - t) / a.steps * 1e3)
            f._end(1)
            if ref is None:
                ref = got
            elif got != ref:
                raise SystemExit(f"set {s}: logits differ from the first set's")
        print(f"round {r}: " + "  ".join(f"{s} {ms[s][-1]:.2f}" for s in sets), flush=True)
    apply("base", saved)
    b = float(np.median(ms[sets[0]]))
    for s in sets:
        m = float(np.median(ms[s]))
        print(f"{s:24s} {m:7.2f} ms a step (median of {a.rounds}; rounds "
              f"{', '.join(f'{v:.2f}' for v in ms[s])})  {m / b:.3f}x of {sets[0]}; steps: min "
              f"{min(steps[s]):.2f}, q1 {np.quantile(steps[s], 0.25):.2f}, median {np.median(steps[s]):.2f}",
              flush=True)
    for s in sets[1:]:      # paired by round: the host's bandwidth moves between rounds
        r = [v / w for v, w in zip(ms[s], ms[sets[0]])]
        print(f"{s} / {sets[0]} by round: {', '.join(f'{v:.3f}' for v in r)} (median "
              f"{float(np.median(r)):.3f})", flush=True)
    print(f"load {os.getloadavg()}; logits equal across sets", flush=True)


if __name__ == "__main__":
    main()
