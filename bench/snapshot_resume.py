"""A resumed conversation's first token against its cold prefill, at the engine (recurrent
families' snapshot slots): a prompt of N tokens prefilled cold in rounds of --chunk, against
a stream that begins on the N - M tokens kept (pages shared, the snapshot restored) and
prefills the M new ones. Prints both times, their ratio and whether the logits are equal.

    PYTHONPATH=$PWD .venv/bin/python bench/snapshot_resume.py [--model dummy:tiny-qwen3next]
        [--tokens 2048] [--new 16] [--chunk 512] [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from server.engine.build import open_model
from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep, SnapStep


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="dummy:tiny-qwen3next")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--new", type=int, default=16)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    eng = open_model(a.model, progress=False).engine
    P, N, M = 16, a.tokens, a.new
    assert (N - M) % P == 0, "the kept prefix ends on a page boundary"
    ids = [(i * 37 + 11) % (eng.spec.vocab - 3) + 3 for i in range(N)]
    per = -(-(N + 1) // P)
    eng.apply(PoolStep(True, 2 * per, P, (eng.page_bytes(P),), 2, N + 1, snaps=1))
    cold_s, warm_s, same = [], [], True
    for _ in range(a.repeat):
        t0 = time.perf_counter()
        eng.apply(BeginStep(0, tuple(range(per))))
        eng.apply(SnapStep(SnapStep.PENDING, 0, stream=0))   # keeps the state at N - M
        for s in range(0, N, a.chunk):
            lg = eng.apply(RoundStep((Chunk(0, s, tuple(ids[s:s + a.chunk]), s + a.chunk >= N),)))
        cold_s.append(time.perf_counter() - t0)
        cold = np.asarray(lg[0]).tobytes()
        kept = (N - M) // P
        t0 = time.perf_counter()
        eng.apply(BeginStep(1, tuple(range(kept)) + tuple(range(per, 2 * per - kept)), kept=kept))
        eng.apply(SnapStep(SnapStep.RESTORE, 0, stream=1, at=N - M))
        lg = eng.apply(RoundStep((Chunk(1, N - M, tuple(ids[N - M:]), True),)))
        warm_s.append(time.perf_counter() - t0)
        same &= np.asarray(lg[0]).tobytes() == cold
        eng.apply(EndStep(0))
        eng.apply(EndStep(1))
    c, w = min(cold_s), min(warm_s)
    print(f"{a.model}: cold prefill of {N} tokens {c * 1e3:.1f} ms; resumed past {N - M} kept "
          f"({M} new) {w * 1e3:.1f} ms; ratio {c / w:.1f}x; logits equal: {same}")


if __name__ == "__main__":
    main()
