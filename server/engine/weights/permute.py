"""llama.cpp's q/k row order, and its inverse.

For arch llama (and mistral) the GGUF converter reorders the rows of q_proj and k_proj
inside each head from HF's "halves" rotary layout to GGML's "interleaved" one:

    HF rows of one head:    [x0 x1 ... x(h/2-1) | y0 y1 ... y(h/2-1)]
    GGUF rows of one head:  [x0 y0 x1 y1 ... ]

Qwen2/Qwen3 are written unpermuted. Here: to_gguf is the converter's order, from_gguf
its inverse (what the loader applies), so that our weights are exactly HF's.
"""
from __future__ import annotations

import numpy as np


def to_gguf(w: np.ndarray, n_head: int) -> np.ndarray:
    # w: [n_head * hd, d]  ->  same shape, rows interleaved per head
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def from_gguf_order(rows: int, n_head: int) -> np.ndarray:
    """The row permutation from_gguf applies: HF row r is GGUF row order[r]."""
    if rows % n_head or (rows // n_head) % 2:
        raise ValueError(f"cannot unpermute {rows} rows over {n_head} heads (head dim must be even)")
    hd = rows // n_head
    return np.arange(rows).reshape(n_head, hd // 2, 2).swapaxes(1, 2).reshape(rows)


def from_gguf(w, n_head: int):
    # w: [n_head * hd, d] in GGUF order  ->  HF order (a fresh C-contiguous array, or Blocks:
    # a row permutation is a byte copy of whole rows, Blocks.take_rows)
    order = from_gguf_order(w.shape[0], n_head)
    if not isinstance(w, np.ndarray):
        return w.permute_rows(order)
    return np.ascontiguousarray(w[order])


# the GGUF architectures whose q/k rows llama.cpp permutes
PERMUTED_ARCHS = ("llama", "mistral")
