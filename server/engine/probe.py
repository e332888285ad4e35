"""Solo against concurrent at the engine, as the server runs it: a stream's logits alone on
stream 0, then the same prompt on another stream among others (a mixed first round of
prefills, then decode rounds), compared byte for byte step by step. Used by the tests on the
CPU and the GPU and by bench/solo_concurrent_probe.py."""
from __future__ import annotations

import hashlib

import numpy as np

from server.ranks.steps import BeginStep, Chunk, EndStep, PoolStep, RoundStep


def _digest(row) -> str:
    return hashlib.sha256(np.asarray(row, dtype=np.float32).tobytes()).hexdigest()[:16]


def solo_vs_concurrent(engine, *, paged: bool, streams: int = 8, target: int = 3, steps: int = 8,
                       page_rows: int = 16, context: int = 256) -> dict:
    per = context // page_rows
    engine.apply(PoolStep(paged, per * streams if paged else 0, page_rows,
                          (engine.page_bytes(page_rows),), streams, context))
    table = (lambda s: tuple(range(s * per, (s + 1) * per))) if paged else (lambda s: ())
    vocab = engine.spec.vocab
    prompts = [[(17 * i + 3 * j) % min(400, vocab - 10) + 10 for j in range(9 + i)]
               for i in range(streams)]

    def run(placement: dict) -> list:
        """placement: stream -> prompt index. Returns the digests of prompt `target`'s rows."""
        for s in placement:
            engine.apply(BeginStep(s, table(s)))
        order = list(placement)
        lg = engine.apply(RoundStep(tuple(Chunk(s, 0, tuple(prompts[placement[s]]), True)
                                          for s in order)))
        seen = []
        for k in range(steps):
            rows = [np.asarray(lg[i], dtype=np.float32) for i in range(len(order))]
            toks = {s: int(np.argmax(r)) for s, r in zip(order, rows)}
            seen.append(_digest(rows[next(i for i, s in enumerate(order) if placement[s] == target)]))
            lg = engine.apply(RoundStep(tuple(
                Chunk(s, len(prompts[placement[s]]) + k, (toks[s],), True) for s in order)))
        for s in order:
            engine.apply(EndStep(s))
        return seen

    solo = run({0: target})                                   # alone, on stream 0
    # among others, on the last stream: stream s runs prompt (s + target + 1) % streams
    mixed = run({s: (s + target + 1) % streams for s in range(streams)})
    first = next((i for i, (x, y) in enumerate(zip(solo, mixed)) if x != y), None)
    return {"paged": paged, "steps": steps, "equal_steps": sum(x == y for x, y in zip(solo, mixed)),
            "first_diff_step": first}
