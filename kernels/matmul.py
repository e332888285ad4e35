"""x @ W with every row's result independent of the other rows (batch invariance).

BLAS picks different kernels (gemv at M=1, threaded splits at large M) and so different
summation orders as the row count changes: the same prompt would give other logits
alone than beside other streams. We therefore always multiply in tiles of exactly TILE
rows, zero-padding the last one. On OpenBLAS every row of a 16-row sgemm is bit-identical
whatever the other rows hold and wherever it sits in the tile (tests/model/test_kernels.py
checks this on the machine that runs the suite).
"""
from __future__ import annotations

import numpy as np

TILE = 16


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
