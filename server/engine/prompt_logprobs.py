"""prompt_logprobs: each prompt token's logprob given the tokens before it, its rank, and
the top-k alternatives (vLLM's `prompt_logprobs`), from the logits of every prompt row.

A request that asks for them prefills its chunks with Chunk.logits = EVERY_ROW: row p of
the prompt (position p) holds the distribution of token p + 1. The arithmetic is the
sampler's own (server/engine/sampler.py: the raw logits' log-softmax, float32, ties to
the lower id), so a prompt token's logprob equals the logprob the sampler reports when it
draws that token after the same prefix; and since a row's logits depend on its position
and prefix alone (batch-invariant products, attention over rows 0..p), they are those of a
request whose prompt ends at p, byte for byte, on either device.
"""
from __future__ import annotations

import numpy as np

from server.engine.sampler import _log_softmax, top_ids

log_softmax = _log_softmax
__all__ = ["log_softmax", "prompt_logprobs", "top_ids"]


def prompt_logprobs(logits, first: int, targets, k: int) -> list:
    """Rows first .. first + len(targets) - 1 of a round's logits (numpy, or the GPU's
    DeviceLogits: one copy of those rows), row j predicting targets[j] ->
    [(token id, logprob, rank, ((id, logprob), ...top k))]. rank: 1 + the ids whose logprob
    is higher than the token's, counting ties (vLLM's count of logprobs >= the token's)."""
    if not len(targets):
        return []
    block = np.asarray(logits[first:first + len(targets)], dtype=np.float32)
    out = []
    for row, t in zip(block, targets):
        ls = log_softmax(row)
        lp = ls[int(t)]
        rank = int(np.count_nonzero(ls >= lp))
        top = tuple((int(i), float(ls[i])) for i in top_ids(ls, k))
        out.append((int(t), float(lp), rank, top))
    return out
