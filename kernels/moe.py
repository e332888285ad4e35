"""A mixture-of-experts layer, the numpy definition: the router, then each token's chosen
experts' SwiGLU MLPs weighted and summed, plus the shared expert.

Router (one row of logits [n_experts] a token, float32 from x @ W_router; the arithmetic
below in float64, each token's row alone):
  softmax (Qwen3-MoE):  p = softmax(logits); choose the top k of p; weights p[chosen],
                        divided by their sum when norm_topk_prob.
  sigmoid (GLM-4.5, DeepSeek-V3 style): p = sigmoid(logits); selection scores s = p + bias
                        (the selection-only `e_score_correction_bias` / `exp_probs_b`);
                        with n_group > 1, the experts in n_group groups, a group scored by
                        the sum of its two best s, only the topk_group best groups kept (the
                        others' s set to 0, as the checkpoint's own code does); choose the
                        top k of s; weights p[chosen] (unbiased), divided by their sum
                        (+1e-20) when norm_topk_prob, times routed_scaling_factor.
  topk_softmax (gpt-oss): logits = x @ W + b (the router's bias); choose the top k of the
                        logits; weights softmax over the chosen k logits alone.
  Ties choose the lower expert id (a stable sort), so a choice is a function of the row.

Experts: every token's chosen experts are taken in ascending expert id; the tokens are
grouped by expert for the matrix products (the products are batch-invariant per row:
kernels/blocks_cpu.py over GGUF blocks, kernels/matmul.py's 4-row tiles over float32), and
each token's output is  ((0 + w_0 y_0) + w_1 y_1) + ...  in that ascending order, in float32,
then + the shared expert's output. Nothing a token computes depends on the other tokens of
the round, so solo == concurrent holds by construction.

Where numba loads, the CPU backends run route, the grouping and combine as numba calls
(kernels/moe_cpu.py: route_group, combine_grouped) beside the F32 router's product as a crew
round (router_logits, kernels/blocks_cpu's bytes): the same operations in the same order, so
these functions' ids, groups and combine bytes; the float32 weights too, but where numpy's
vector exp and libm's differ in a float64 last bit and that turns the float32 rounding (none
in 560,000 weights of random rows, receipt 2026-12-05-moeglue; tests/model/test_moe_glue.py
allows one ulp).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Routing(NamedTuple):
    kind: str               # "softmax" | "sigmoid" | "topk_softmax"
    k: int                  # experts a token takes
    norm: bool              # renormalise the chosen weights
    scale: float            # routed_scaling_factor
    n_group: int = 1
    topk_group: int = 1


def route(logits: np.ndarray, routing: Routing, bias=None) -> tuple[np.ndarray, np.ndarray]:
    """logits [T, E] -> (ids [T, k] int64 ascending per row, weights [T, k] float32)."""
    z = np.asarray(logits, dtype=np.float64)
    T, E = z.shape
    if routing.kind == "topk_softmax":
        ids = np.argsort(-z, axis=1, kind="stable")[:, :routing.k]
        ids.sort(axis=1)
        top = np.take_along_axis(z, ids, axis=1)
        e = np.exp(top - top.max(axis=1, keepdims=True))
        return ids.astype(np.int64), (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
    if routing.kind == "softmax":
        e = np.exp(z - z.max(axis=1, keepdims=True))
        p = e / e.sum(axis=1, keepdims=True)
        s = p
    elif routing.kind == "sigmoid":
        p = 1.0 / (1.0 + np.exp(-z))
        s = p if bias is None else p + np.asarray(bias, dtype=np.float64)[None, :]
    else:
        raise ValueError(f"router {routing.kind!r}: softmax or sigmoid")
    if routing.n_group > 1:
        g = s.reshape(T, routing.n_group, E // routing.n_group)
        top2 = -np.sort(-g, axis=2, kind="stable")[:, :, :2].sum(axis=2)         # [T, groups]
        keep = np.argsort(-top2, axis=1, kind="stable")[:, :routing.topk_group]
        mask = np.zeros((T, routing.n_group), bool)
        np.put_along_axis(mask, keep, True, axis=1)
        s = np.where(np.repeat(mask, E // routing.n_group, axis=1), s, 0.0)
    ids = np.argsort(-s, axis=1, kind="stable")[:, :routing.k]
    ids.sort(axis=1)                                                  # the summation order
    w = np.take_along_axis(p, ids, axis=1)
    if routing.norm:
        w = w / (w.sum(axis=1, keepdims=True) + (1e-20 if routing.kind == "sigmoid" else 0.0))
    if routing.scale != 1.0:
        w = w * routing.scale
    return ids.astype(np.int64), w.astype(np.float32)


def groups(ids: np.ndarray):
    """[(expert, token rows, slots)] for each expert some token chose, ascending expert id:
    the grouping of a round's tokens for the experts' products."""
    out = []
    for e in np.unique(ids):
        t, slot = np.nonzero(ids == e)
        out.append((int(e), t, slot))
    return out


def combine(y: np.ndarray, w: np.ndarray) -> np.ndarray:
    """y [T, k, d] (each slot's expert output), w [T, k] -> [T, d]: slots summed in order."""
    out = w[:, 0, None] * y[:, 0]
    for j in range(1, y.shape[1]):
        out += w[:, j, None] * y[:, j]
    return out.astype(np.float32, copy=False)
