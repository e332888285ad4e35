"""x @ W with every row's result independent of the other rows (batch invariance).

BLAS picks different kernels (gemv at M=1, threaded splits at large M) and so different
summation orders as the row count changes: the same prompt would give other logits
alone than beside other streams. We therefore always multiply in tiles of exactly TILE
rows, zero-padding the last one. TILE is 4: OpenBLAS's Haswell sgemm handles rows in groups
of 6 with a remainder kernel, and a row's result moves with its place in such a group; at
4 rows every row goes through the same remainder kernel, bit-identical whatever the other
rows hold, wherever it sits, one thread or two (measured here for 11 shapes;
tests/model/test_invariance.py checks it on the machine that runs the suite).
"""
from __future__ import annotations

import numpy as np

TILE = 4


def ref(x: np.ndarray, w: np.ndarray, bias: np.ndarray | None = None) -> np.ndarray:
    # x: [M, K] float32, w: [K, N] float32 -> [M, N]
    m = x.shape[0]
    out = np.empty((m, w.shape[1]), dtype=np.float32)
    pad = np.zeros((TILE, x.shape[1]), dtype=np.float32)
    for s in range(0, m, TILE):
        e = min(s + TILE, m)
        if e - s == TILE:
            out[s:e] = x[s:e] @ w
        else:
            pad[: e - s] = x[s:e]
            pad[e - s:] = 0.0
            out[s:e] = (pad @ w)[: e - s]
    if bias is not None:
        out += bias
    return out
