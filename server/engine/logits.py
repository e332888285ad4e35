"""A round's logits left on the GPU until someone needs them on the host.

At 64 streams of a 128k vocabulary the whole [rows, vocab] float32 block is 33 MB a round;
a greedy stream needs only its arg-max. `argmax_rows()` is one launch of our arg-max kernel
(kernels/argmax_cuda.py) and a copy of one int a row; `row(i)` (or `logits[i]`) copies one row for the host sampler. Ties go to
the first index on both paths (numpy and cupy arg-max agree), so greedy replies do not
depend on which path chose them. `sample_rows()` picks the token of every row of a round
that is not plain greedy, and those beside them, in one launch (kernels/sample_cuda.py):
penalties, logit_bias, min_tokens' banned eos and the grammar's bitmask (computed on a host
thread while the round runs) are applied on the device, then greedy or the counter-based
draw of kernels/sample.py (on GPUs sampled replies follow it, not the host generator). One
upload of the rows' inputs, one int a row back; only rows asking for logprobs copy their
raw row to the host (`row(i)`).
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
        """One launch picking a token for each of `rows` (their SamplerStates; steps = the
        token's index in each reply): kernels/sample_cuda.py. Codes -1 (nothing allowed)
        and -2 (NaN or +inf), -4 (its inputs failed) are for sampler.device_token to turn into
        the host's errors."""
        from kernels import sample_cuda
        return draw_rows(lambda args: sample_cuda.cuda(self.arr, rows, step=steps, **args).get(),
                         states)


def device_args(states) -> tuple[dict, list]:
    """(the per-row argument lists of kernels.sample.ref / sample_cuda.cuda for these states,
    the indices of the states whose inputs failed: their rows are drawn greedily and
    discarded). A failure (a grammar matcher's error) stays on its state (`device_error`),
    so it ends that request alone and the others' tokens do not change."""
    rows, failed = [], []
    for i, s in enumerate(states):
        try:
            rows.append(s.device_inputs())
        except Exception as e:
            s.device_error = e
            failed.append(i)
            rows.append(dict(temperature=0.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, salt=0,
                             rep=1.0, pres=0.0, freq=0.0, adj=(), mask=None, plain=True))
    return ({k: [r[k] for r in rows] for k in rows[0]} if rows else {}), failed


def draw_rows(draw, states) -> list:
    """draw(args) -> tokens for device_args(states)'s args; the failed rows' tokens -> -4."""
    args, failed = device_args(states)
    toks = [int(t) for t in draw(args)]
    for i in failed:
        toks[i] = -4
    return toks


def argmax_rows(logits) -> list:
    """First arg-max of every row, on whichever device holds them."""
    if hasattr(logits, "argmax_rows"):
        return logits.argmax_rows()
    return np.argmax(logits, axis=1).tolist()
