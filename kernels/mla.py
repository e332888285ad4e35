"""Multi-head latent attention (DeepSeek-V2/V3, GLM-4.7-Flash), the numpy definition, in the
absorbed form for every position (prefill and decode alike).

A token's KV is one row per layer (kernels see it as a pool of [pages, P, 1, C + R]):

    row = [ rmsnorm(c_kv) (C = kv_lora_rank) | rope(k_pe) (R = qk_rope_head_dim) ]

Query head h, at position p, with q_nope [N] and q_pe [R] from q (q_b or plain q):

    q_lat   = q_nope @ W_UK[h]                    W_UK[h] = kv_b's k rows of head h, [N, C]
    scores  = ([q_lat | rope(q_pe)] . row_s) * scale      over rows s = 0 .. p
    o_lat   = softmax(scores) @ rows[:, :C]      [C]
    out[h]  = o_lat @ W_UV[h]^T                  W_UV[h] = kv_b's v rows of head h, [V, C]

which equals the textbook form (k_nope = W_UK c, v = W_UV c, scores q_nope.k_nope + q_pe.k_pe)
in exact arithmetic; one form for all positions means a row's bytes never depend on how the
query reached it (a prompt's prefill or a decode step), so paged == window, solo ==
concurrent and resumed == fresh hold by construction, as for the MHA form (kernels/attention.py).

Batch invariance: every product goes through kernels/matmul.ref (4-row tiles), so a head's
scores do not depend on how many heads a rank holds (TP) nor a row's on the chunk's rows;
each query row attends over exactly rows 0..p.

RoPE here is the interleaved (GPT-J / llama.cpp NORM) form DeepSeek's checkpoints use
(transformers' `rope_interleave`): dims (2i, 2i+1) rotate by inv[i].
"""
from __future__ import annotations

import numpy as np

from kernels import matmul, rmsnorm
from kernels.attention import gather_rows


def rope_interleaved(x: np.ndarray, positions: np.ndarray, inv: np.ndarray) -> np.ndarray:
    """x [M, H, R] (pairs (2i, 2i+1)) rotated by positions [M] x inv [R/2] -> [M, H, R]."""
    from kernels.rope import cos_sin
    cos, sin = cos_sin(positions, inv)
    cos, sin = cos[:, None, :], sin[:, None, :]
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty(x.shape, np.float32)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def latent_rows(ckv: np.ndarray, kv_norm: np.ndarray, eps: float, C: int, positions, inv):
    """kv_a's output [T, C + R] -> the rows a token stores [T, 1, C + R]."""
    T = ckv.shape[0]
    rows = np.empty((T, 1, ckv.shape[1]), np.float32)
    rows[:, 0, :C] = rmsnorm.ref(np.ascontiguousarray(ckv[:, :C]), kv_norm, eps)
    rows[:, :, C:] = rope_interleaved(np.ascontiguousarray(ckv[:, None, C:]), positions, inv)
    return rows


def absorb_q(q: np.ndarray, w_uk: np.ndarray, N: int, positions, inv) -> np.ndarray:
    """q [T, H, N + R] -> [T, H, C + R]: q_nope through W_UK ([H, N, C]), q_pe rotated."""
    T, H, _ = q.shape
    C = w_uk.shape[2]
    out = np.empty((T, H, C + q.shape[2] - N), np.float32)
    for h in range(H):
        out[:, h, :C] = matmul.ref(np.ascontiguousarray(q[:, h, :N]), w_uk[h])
    out[:, :, C:] = rope_interleaved(np.ascontiguousarray(q[:, :, N:]), positions, inv)
    return out


def write(pool: np.ndarray, table, page_rows: int, start: int, rows: np.ndarray) -> None:
    """rows [n, 1, W] into the stream's rows start .. start+n-1 of pool [pages, P, 1, W]."""
    n, r = rows.shape[0], start
    while r < start + n:
        page, off = table[r // page_rows], r % page_rows
        take = min(page_rows - off, start + n - r)
        pool[page, off:off + take] = rows[r - start:r - start + take]
        r += take


def attend(qa: np.ndarray, pool: np.ndarray, table, page_rows: int, start: int, C: int,
           scale: float) -> np.ndarray:
    """qa [n, H, C + R] at positions start .. start+n-1 over the stream's latent rows ->
    o_lat [n, H, C]."""
    n, H, W = qa.shape
    R = gather_rows(pool, table, page_rows, start + n)[:, 0]          # [L, W]
    RT = np.ascontiguousarray(R.T)                                   # [W, L]
    V = np.ascontiguousarray(R[:, :C])                               # [L, C]
    out = np.empty((n, H, C), np.float32)
    for i in range(n):
        L = start + i + 1
        s = matmul.ref(qa[i], np.ascontiguousarray(RT[:, :L])) * np.float32(scale)   # [H, L]
        s = s - s.max(axis=-1, keepdims=True)
        w = np.exp(s)
        w = w / w.sum(axis=-1, keepdims=True)
        out[i] = matmul.ref(w, V[:L])                                # [H, C]
    return out


def expand_v(o_lat: np.ndarray, w_uv_t: np.ndarray) -> np.ndarray:
    """o_lat [T, H, C] through W_UV ([H, C, V], each head's v rows transposed) -> [T, H * V]."""
    T, H, _ = o_lat.shape
    V = w_uv_t.shape[2]
    out = np.empty((T, H, V), np.float32)
    for h in range(H):
        out[:, h] = matmul.ref(np.ascontiguousarray(o_lat[:, h]), w_uv_t[h])
    return out.reshape(T, H * V)


def round_attend(q, ckv, kv_norm, eps, w_uk, w_uv_t, N, pool, rows, inv, scale):
    """A round's latent attention: q [T, H, N + R] (this rank's heads), ckv [T, C + R] (every
    rank the same) -> [T, H * V]. Chunk by chunk: write its rows, then attend."""
    C = w_uk.shape[2]
    lat = latent_rows(ckv, kv_norm, eps, C, rows.pos, inv)
    qa = absorb_q(q, w_uk, N, rows.pos, inv)
    o = np.empty((q.shape[0], q.shape[1], C), np.float32)
    for (a, b), c in zip(rows.spans, rows.chunks):
        write(pool, c.table, c.page_rows, c.start, lat[a:b])
        o[a:b] = attend(qa[a:b], pool, c.table, c.page_rows, c.start, C, scale)
    return expand_v(o, w_uv_t)
