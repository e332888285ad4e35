"""The default model's logits through the engine, as bytes: a 1,000-key prefill, then one
stream's chunks of 1, 4, 8 and 9 rows (every row's logits); sha256 of each round's logits, to
compare two checkouts' bytes (run it in each).

  PYTHONPATH=$PWD python docs/receipts/2026-12-05-verify-rows/logits_hash.py
"""
import hashlib

import numpy as np

import kernels
kernels.init()
from server.engine.build import open_model  # noqa: E402
from server.ranks.steps import EVERY_ROW, BeginStep, Chunk, PoolStep, RoundStep  # noqa: E402

eng = open_model(None, progress=False).engine
KEYS = 1000
P = KEYS // 16 + 4
eng.apply(PoolStep(True, P, 16, (eng.page_bytes(16),), 1, P * 16))
eng.apply(BeginStep(0, tuple(range(P))))
ids = [100 + (i * 37) % 5000 for i in range(KEYS + 20)]
for c0 in range(0, KEYS, 256):
    eng.apply(RoundStep((Chunk(0, c0, tuple(ids[c0:min(KEYS, c0 + 256)]), False),)))
for k in (1, 4, 8, 9, 17):
    out = eng.apply(RoundStep((Chunk(0, KEYS, tuple(ids[KEYS:KEYS + k]), EVERY_ROW),)))
    arrs = [np.asarray(a) for a in (out if isinstance(out, (list, tuple)) else [out]) if a is not None]
    h = hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrs if hasattr(a, "tobytes"))).hexdigest()[:16]
    print(k, "rows:", type(out).__name__, [getattr(a, "shape", None) for a in arrs], h)
