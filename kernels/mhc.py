"""mHC (manifold-constrained hyper-connections, GLM-5.3-Flash): N residual streams (hc_mult,
4) around every block, mixed by a Sinkhorn-normalised matrix; the numpy definition.

A token's hidden state is N streams [N, D]. Before a block (attention or MLP) `pre`:

    flat   = unweighted RMSNorm of the N x D streams as one row (eps = rms_norm_eps)
    mixes  = flat @ fn^T                            [(2 + N) N]   (fn: [(2 + N) N, N D])
    pre    = sigmoid(mixes[:N] * scale[0] + base[:N]) + hc_eps
    post   = 2 sigmoid(mixes[N:2N] * scale[1] + base[N:2N])
    comb   = softmax_rows(mixes[2N:].view(N, N) * scale[2] + base[2N:].view(N, N)) + hc_eps
    comb   = comb / (column sums + hc_eps); then (iters - 1) times: rows, then columns
    x      = sum_i pre[i] streams[i]                the block's input [D]

and after it `post_mix` (y the block's output [D]):

    out[j] = post[j] y + sum_i comb[i, j] streams[i]      (transformers: comb^T @ residual)

the head reading their mean (`head`: sum_i streams[i] / N). This is transformers'
Glm5NextTextHyperConnection / HyperHead and llama.cpp's build_hc_pre / build_hc_post.

One fixed order, whatever the batch: every sum over the N streams is the chain
((a_0 + a_1) + a_2) + a_3 in stream order; out[j] = (((post[j] y + comb[0, j] s_0) +
comb[1, j] s_1) + comb[2, j] s_2) + comb[3, j] s_3 (llama.cpp's chain); a row sum of comb is
over its last index in order, a column sum over its first; the projection goes through
kernels/matmul.py's 4-row tiles and the norm's mean of squares through numpy's per-row
reduction (kernels/rmsnorm.py's), so a token's numbers depend on that token alone: a row
alone == the same row in any batch, byte for byte (tests/model/test_mhc.py). float32
throughout, as transformers' float32 model computes it (its own sums in other orders: the
recorded case agrees to float rounding, tests/data/glm53/mhc_case.json).
"""
from __future__ import annotations

import numpy as np

from kernels import matmul

F32 = np.float32


def _chain_sum(parts):
    acc = parts[0]
    for p in parts[1:]:
        acc = acc + p
    return acc


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (F32(1.0) / (F32(1.0) + np.exp(-x))).astype(F32)


def weights(streams: np.ndarray, fn_t: np.ndarray, base: np.ndarray, scale: np.ndarray, *,
            norm_eps: float, hc_eps: float, iters: int):
    """streams [T, N, D] float32; fn_t [N D, (2 + N) N] (fn transposed, as kernels/matmul.py
    takes it), base [(2 + N) N], scale [3] -> (pre [T, N], post [T, N], comb [T, N, N]), each
    row its token's alone. comb[t, i, j]: how much of input stream i goes to output stream j."""
    T, N, D = streams.shape
    if fn_t.shape != (N * D, (2 + N) * N):
        raise ValueError(f"mhc: fn is {fn_t.shape[::-1]}, expected {((2 + N) * N, N * D)} "
                         f"for {N} streams of {D}")
    if iters < 1:
        raise ValueError(f"mhc: hc_sinkhorn_iters = {iters}, at least 1")
    flat = np.ascontiguousarray(streams.reshape(T, N * D), dtype=F32)
    var = np.mean(flat * flat, axis=-1, keepdims=True, dtype=F32)
    flat = (flat * (F32(1.0) / np.sqrt(var + F32(norm_eps)))).astype(F32)
    mixes = matmul.ref(flat, fn_t)                                   # [T, (2 + N) N]
    eps = F32(hc_eps)
    base, scale = base.astype(F32), scale.astype(F32)
    pre = _sigmoid(mixes[:, :N] * scale[0] + base[:N]) + eps
    post = F32(2.0) * _sigmoid(mixes[:, N:2 * N] * scale[1] + base[N:2 * N])
    logits = (mixes[:, 2 * N:] * scale[2] + base[2 * N:]).reshape(T, N, N).astype(F32)
    e = np.exp(logits - logits.max(axis=-1, keepdims=True))
    comb = (e / _chain_sum([e[:, :, k:k + 1] for k in range(N)])).astype(F32) + eps

    def cols(c):
        return c / (_chain_sum([c[:, k:k + 1, :] for k in range(N)]) + eps)

    def rows(c):
        return c / (_chain_sum([c[:, :, k:k + 1] for k in range(N)]) + eps)

    comb = cols(comb)
    for _ in range(iters - 1):
        comb = cols(rows(comb))
    return pre.astype(F32), post.astype(F32), comb.astype(F32)


def collapse(streams: np.ndarray, pre: np.ndarray) -> np.ndarray:
    """The block's input [T, D]: sum_i pre[:, i] streams[:, i] in stream order."""
    N = streams.shape[1]
    return _chain_sum([pre[:, i:i + 1] * streams[:, i] for i in range(N)]).astype(F32)


def post_mix(y: np.ndarray, streams: np.ndarray, post: np.ndarray, comb: np.ndarray) -> np.ndarray:
    """The streams after a block [T, N, D]: out[:, j] = post[:, j] y + sum_i comb[:, i, j]
    streams[:, i], as the chain (((post y + c0 s0) + c1 s1) + c2 s2) + c3 s3."""
    T, N, D = streams.shape
    out = np.empty((T, N, D), F32)
    for j in range(N):
        acc = post[:, j:j + 1] * y
        for i in range(N):
            acc = acc + comb[:, i, j:j + 1] * streams[:, i]
        out[:, j] = acc
    return out


def expand(x: np.ndarray, n: int) -> np.ndarray:
    """The embedding [T, D] as n equal streams [T, n, D] (the model's first streams)."""
    return np.ascontiguousarray(np.repeat(x[:, None, :], n, axis=1), dtype=F32)


def head(streams: np.ndarray) -> np.ndarray:
    """The head's input [T, D]: the streams' mean, ((s0 + s1) + s2) + s3 times 1 / N."""
    N = streams.shape[1]
    return (_chain_sum([streams[:, i] for i in range(N)]) * F32(1.0 / N)).astype(F32)


def block(streams, fn_t, base, scale, f, *, norm_eps, hc_eps, iters):
    """One block with its hyper-connection: pre, f (the block: [T, D] -> [T, D]), post_mix."""
    pre, post, comb = weights(streams, fn_t, base, scale, norm_eps=norm_eps, hc_eps=hc_eps,
                              iters=iters)
    return post_mix(f(collapse(streams, pre)), streams, post, comb)
