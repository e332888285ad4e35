"""foldserve check-pages: a paged stream against its whole-window twin, byte for byte.

For each prompt, the same model runs it twice: once on a window (one page of `context`
rows), once on pages taken from a pool (with a second stream taking and giving pages in
between, so the table is scattered and out of order, and every page poisoned with NaN
before use). Prompts sit at page edges (P-1, P, P+1 rows), at prefill-chunk edges and
across many pages; then decode rows cross a page edge. A recurrent family's fixed part
(its states, slot 0 of each store) starts fresh for each run. Logits and tokens must be equal
byte for byte, and every page free at the end. (A KV window kind's window layers read
their stream's ring in both, server/shapes/kv_layout.py: the check is of the pages.)
"""
from __future__ import annotations

import random
import sys
import time

import numpy as np

from server.engine.kvstore import KVStore
from server.planner.pool import Pool


def _lengths(P: int, chunk: int) -> list:
    ls = {P - 1, P, P + 1, chunk - 1, chunk, chunk + 1, 5 * P + 3, 2 * chunk + P // 2}
    return sorted(n for n in ls if n > 0)


def run_check(engine, *, page_rows: int = 16, prefill_chunk: int = 64, decode: int = 4,
              seed: int = 0, out=sys.stdout) -> int:
    spec, xp = engine.spec, engine.xp
    lengths = _lengths(page_rows, prefill_chunk)
    context = max(lengths) + decode + page_rows
    pages_per = -(-context // page_rows)
    n_pages = 3 * pages_per + 7
    pool = Pool(n_pages, poison=True)
    s = spec
    mk = lambda paged: KVStore.of(xp, engine.kv_spec, engine.kv_dtype, paged=paged,
                                  pages=n_pages, page_rows=page_rows, streams=1,
                                  context=context)
    win, pag = mk(False), mk(True)
    rng = random.Random(seed)
    failures, checks = [], 0
    t0 = time.monotonic()
    for n in lengths:
        # a second stream takes pages and gives some back: the next table is scattered
        other = pool.take(rng.randint(1, pages_per))
        table = list(pool.take(pages_per))
        pool.give(other[::2])
        rng.shuffle(table)                          # pages in any order
        win.poison(0, (), 0)
        pag.poison(0, table, 0)
        pool.pop_fresh()
        prompt = [rng.randrange(3, s.vocab) for _ in range(n)]
        results = []
        for kv, tbl, prow in ((win, (0,), context), (pag, tuple(table), page_rows)):
            kv.reset_fixed(0)                           # recurrent layers: a fresh state
            logits, toks, pos = [], [], 0
            while pos < n:                              # prefill in chunks
                m = min(prefill_chunk, n - pos)
                lg = engine.model.forward([(tbl, prow, pos, tuple(prompt[pos:pos + m]), True,
                                            kv.ring_table(0, pos + m), 0)], kv)
                pos += m
            for _ in range(decode):                     # decode rows across the next page edge
                row = np.asarray(lg.get() if hasattr(lg, "get") else lg)[0]
                logits.append(row.tobytes())
                t = int(np.argmax(row))
                toks.append(t)
                lg = engine.model.forward([(tbl, prow, pos, (t,), True,
                                            kv.ring_table(0, pos + 1), 0)], kv)
                pos += 1
            results.append((logits, toks))
        (lw, tw), (lp, tp) = results
        checks += 1
        same = lw == lp and tw == tp
        first = next((i for i, (a, b) in enumerate(zip(lw, lp)) if a != b), None)
        print(f"  prompt {n:5d} rows over {len(table)} pages (first {table[:4]}...): "
              f"{'equal' if same else f'DIFFERENT at decode step {first}'}; tokens {tw}", file=out)
        if not same:
            failures.append(n)
        pool.give(table)
        pool.give(other[1::2])
        pool.check_integrity()
    free_ok = pool.free == pool.total
    print(f"check-pages: {checks - len(failures)} of {checks} prompts equal byte for byte "
          f"(page rows {page_rows}, prefill chunk {prefill_chunk}, {decode} decode rows); "
          f"{pool.free} of {pool.total} pages free at the end; {time.monotonic() - t0:.1f} s",
          file=out)
    return 0 if not failures and free_ok else 1
