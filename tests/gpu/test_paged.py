"""Paging changes addresses only, on the GPU too: a paged stream (pages out of order,
NaN before use) and its whole-window twin give the same attention bytes, at page edges
and across chunk edges; and a chunk's rows equal the same rows computed in other chunks."""
from __future__ import annotations

import numpy as np
import pytest


rng = np.random.default_rng()


@pytest.mark.parametrize("P", [16, 7])
def test_paged_equals_window_bytes(P):
    import cupy as cp
    from kernels import attention_cuda, kv_write_cuda
    from kernels.common_cuda import BF16
    hq, kv, hd, ctx = 9, 3, 64, 96
    pages = -(-ctx // P)
    table = tuple(int(t) for t in rng.permutation(pages + 5)[:pages])
    nan = lambda n, rows: cp.full((n, rows, kv, hd), 0x7FC0, dtype=cp.uint16).view(BF16)
    kp, vp = nan(pages + 5, P), nan(pages + 5, P)
    kw, vw = nan(2, ctx), nan(2, ctx)
    outs = {"paged": [], "window": []}
    # chunks whose edges fall at P-1, P, P+1 and mid-page; then single decode rows
    edges = [0, P - 1, P, P + 1, 2 * P + 3, 60, 61, 62, 63, 64]
    for a, b in zip(edges, edges[1:]):
        k = cp.asarray(rng.standard_normal((b - a, kv, hd)).astype(np.float32))
        v = cp.asarray(rng.standard_normal((b - a, kv, hd)).astype(np.float32))
        q = cp.asarray(rng.standard_normal((b - a, hq, hd)).astype(np.float32))
        kv_write_cuda.cuda(kp, vp, table, P, a, k, v)
        kv_write_cuda.cuda(kw, vw, (1,), ctx, a, k, v)
        outs["paged"].append(cp.asnumpy(attention_cuda.cuda(q, kp, vp, table, P, a, 0.125).view(cp.uint16)))
        outs["window"].append(cp.asnumpy(attention_cuda.cuda(q, kw, vw, (1,), ctx, a, 0.125).view(cp.uint16)))
    for x, y in zip(outs["paged"], outs["window"]):
        assert np.array_equal(x, y)


def test_rows_do_not_depend_on_their_chunk():
    """Rows 0..39 as one prefill chunk == the same rows as chunks of 13 and single rows."""
    import cupy as cp
    from kernels import attention_cuda, kv_write_cuda
    from kernels.common_cuda import as_bf16
    hq, kv, hd, P, L = 32, 8, 128, 16, 40
    kp = as_bf16(cp.asarray(rng.standard_normal((4, P, kv, hd)).astype(np.float32)))
    vp = as_bf16(cp.asarray(rng.standard_normal((4, P, kv, hd)).astype(np.float32)))
    table = (2, 0, 3)
    q = cp.asarray(rng.standard_normal((L, hq, hd)).astype(np.float32))
    whole = cp.asnumpy(attention_cuda.cuda(q, kp, vp, table, P, 0, 0.088).view(cp.uint16))
    parts = [cp.asnumpy(attention_cuda.cuda(q[a:a + 13], kp, vp, table, P, a, 0.088).view(cp.uint16))
             for a in range(0, L, 13)]
    assert np.array_equal(np.concatenate(parts), whole)
    one = cp.asnumpy(attention_cuda.cuda(q[L - 1:], kp, vp, table, P, L - 1, 0.088).view(cp.uint16))
    assert np.array_equal(one, whole[L - 1:])
