"""A round's logits left on the GPU until someone needs them on the host.

At 64 streams of a 128k vocabulary the whole [rows, vocab] float32 block is 33 MB a round;
a greedy stream needs only its arg-max. `argmax_rows()` is one launch of our arg-max kernel
(kernels/argmax_cuda.py) and a copy of one int a row; `row(i)` (or `logits[i]`) copies one row for the host sampler. Ties go to
the first index on both paths (numpy and cupy arg-max agree), so greedy replies do not
depend on which path chose them. `sample_rows()` draws the sampled rows that need no host
state (no penalties, no logprobs) in one launch and copies one int a row; on GPUs their
replies follow kernels/sample.py's counter-based draw, not the host generator's.
Rows with logit_bias, min_tokens or a grammar (SamplerState.shaped) take neither shortcut:
the scheduler copies them with `row(i)` and the host sampler applies bias and masks
(grammar masks are computed on a host thread while the round runs; the masks are not
applied on the device yet, and the cost is not measured on a GPU).
"""
from __future__ import annotations

import numpy as np


class DeviceLogits:
    def __init__(self, arr):
        self.arr = arr                      # cupy [rows, vocab], any float dtype

    def __len__(self) -> int:
        return int(self.arr.shape[0])

    def __getitem__(self, i) -> np.ndarray:
        return self.arr[i].astype("float32").get()

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def get(self) -> np.ndarray:
        return self.arr.astype("float32").get()

    def __array__(self, dtype=None, copy=None):
        a = self.get()
        return a if dtype is None else a.astype(dtype)

    def argmax_rows(self) -> list:
        from kernels import argmax_cuda
        return argmax_cuda.cuda(self.arr).get().tolist()

    def sample_rows(self, rows, states, steps) -> list:
        """One launch drawing a token for each of `rows` (SamplerStates that are
        `device_sampled`; steps = the token's index in each reply): kernels/sample_cuda.py."""
        from kernels import sample_cuda
        ps = [s.params for s in states]
        out = sample_cuda.cuda(self.arr, rows, [p.temperature for p in ps], [p.top_k for p in ps],
                               [p.top_p for p in ps], [p.min_p for p in ps],
                               [s.device_seed for s in states], [s.salt for s in states], steps)
        return out.get().tolist()


def argmax_rows(logits) -> list:
    """First arg-max of every row, on whichever device holds them."""
    if hasattr(logits, "argmax_rows"):
        return logits.argmax_rows()
    return np.argmax(logits, axis=1).tolist()
