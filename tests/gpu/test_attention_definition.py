"""Tensor-core attention keeps its definition: every output bit of `attend` (any mode, any
tile, rows beside other rows, pages anywhere) equals `reference`, the kernel that runs the
arithmetic of kernels/attention_cuda.py with each (row, head) alone in m-row 0 of its mma.
This is what makes solo == concurrent and chunked == whole hold by construction."""
from __future__ import annotations

import numpy as np
import pytest

from tests.gpu.test_split_attention import MODES, _bytes, _ref, _streams
from tests.gpu.conftest import rel

rng = np.random.default_rng()


@pytest.mark.parametrize("hq,kv,hd,P,start,n", [
    (32, 8, 128, 16, 0, 1),          # the first token
    (32, 8, 128, 16, 63, 2),         # across the first span edge
    (32, 8, 128, 16, 2000, 48),      # a llama3 prefill chunk far in
    (32, 8, 128, 16, 3000, 1),       # a decode row of 47 spans
    (9, 3, 64, 7, 100, 30),          # smollm2's G = 3 (21 rows a tile), odd pages
    (8, 8, 128, 32, 500, 70),        # MHA: 64 rows a tile, a second tile
    (64, 1, 64, 16, 200, 3),         # G = 64: one row a tile fills all m-rows
])
def test_every_bit_equals_the_definition(monkeypatch, hq, kv, hd, P, start, n):
    import cupy as cp
    from kernels import attention_cuda
    from kernels.common_cuda import as_f32
    L = start + n
    kp, vp, (table,), (K,), (V,) = _streams([L], kv, hd, P)
    q = cp.asarray(rng.standard_normal((n, hq, hd)).astype(np.float32))
    scale = hd ** -0.5
    want = _bytes(attention_cuda.reference(q, kp, vp, table, P, start, scale))
    assert rel(as_f32(attention_cuda.reference(q, kp, vp, table, P, start, scale)).get(),
               _ref(q.get(), K, V, start, scale)) < 1e-2
    for mode in MODES:
        for pf in (True, False):
            monkeypatch.setattr(attention_cuda, "FORCE_SPLIT", mode)
            monkeypatch.setattr(attention_cuda, "PREFETCH", pf)
            got = _bytes(attention_cuda.cuda(q, kp, vp, table, P, start, scale))
            diff = int((got != want).sum())
            assert diff == 0, (mode, pf, f"{diff} of {got.size} words differ")


def test_a_mixed_round_equals_the_definition_row_by_row():
    """Decode rows, a prefill chunk and padding rows in one launch (as a serving round):
    each chunk's rows == the definition's, padding rows are zeros."""
    import cupy as cp
    from kernels import attention_cuda
    hq, kv, hd, P = 32, 8, 128, 16
    G = hq // kv
    lengths = [901, 65, 1500, 3]
    kp, vp, tables, _, _ = _streams(lengths, kv, hd, P)
    starts, ns = [900, 64, 1460, 0], [1, 1, 40, 3]
    chunks = [(tables[i], P, starts[i], range(ns[i]), True) for i in range(4)]
    qs = [cp.asarray(rng.standard_normal((k, hq, hd)).astype(np.float32)) for k in ns]
    t, sl, p, tr, tn = attention_cuda.host_map(chunks, G)
    T = len(p)
    q = cp.concatenate(qs + [cp.asarray(rng.standard_normal((2, hq, hd)).astype(np.float32))])
    # two padding rows at the end, one tile each (as CUDA-graph buckets have)
    rm = attention_cuda.RoundMap(cp.asarray(t), cp.asarray(np.r_[sl, 0, 0].astype(np.int32)),
                                 cp.asarray(np.r_[p, -1, -1].astype(np.int32)),
                                 cp.asarray(np.r_[tr, T, T + 1].astype(np.int32)),
                                 cp.asarray(np.r_[tn, 1, 1].astype(np.int32)), P)
    got = _bytes(attention_cuda.cuda_round(q, kp, vp, rm, 0.088))
    o = 0
    for i in range(4):
        want = _bytes(attention_cuda.reference(qs[i], kp, vp, tables[i], P, starts[i], 0.088))
        assert np.array_equal(got[o:o + ns[i]], want), i
        o += ns[i]
    assert not got[T:].any()


def test_pi_order_output_is_the_permute_of_the_natural_bytes():
    """pi=True (the o GEMM's x for its TMA kernel) writes each row's 32-element chunks in pi
    order: the permute of the natural output, in both modes, for prefill and decode tiles."""
    import cupy as cp
    from kernels import attention_cuda, matmul_pi_cuda
    hq, kv, hd, P = 32, 8, 128, 16
    lengths = [901, 1500, 3]
    kp, vp, tables, _, _ = _streams(lengths, kv, hd, P)
    starts, ns = [900, 1400, 0], [1, 100, 3]
    chunks = [(tables[i], P, starts[i], range(ns[i]), True) for i in range(3)]
    q = cp.asarray(rng.standard_normal((sum(ns), hq, hd)).astype(np.float32))
    rm = attention_cuda.round_map(chunks, hq // kv)
    kept = attention_cuda.FORCE_SPLIT
    try:
        for split in (False, True):
            attention_cuda.FORCE_SPLIT = split
            nat = attention_cuda.cuda_round(q, kp, vp, rm, 0.088)
            pi = attention_cuda.cuda_round(q, kp, vp, rm, 0.088, pi=True)
            assert np.array_equal(_bytes(pi), _bytes(matmul_pi_cuda.permute(nat))), split
    finally:
        attention_cuda.FORCE_SPLIT = kept
