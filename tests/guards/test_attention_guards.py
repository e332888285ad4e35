"""The numpy reference kernels: a query row at position p reads rows 0..p and nothing
else, and a window and a page table hold a stream's rows in the same order, so paged ==
window and chunked == one row at a time, byte for byte."""
from __future__ import annotations

import numpy as np
import pytest

from kernels import attention, kv_write

KV, HQ, HD = 2, 4, 8
SCALE = 1.0 / np.sqrt(HD)


def rows(n, seed):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, KV, HD)).astype(np.float32),
            r.standard_normal((n, KV, HD)).astype(np.float32),
            r.standard_normal((n, HQ, HD)).astype(np.float32))


def window_pools(context):
    return (np.full((1, context, KV, HD), np.nan, np.float32),
            np.full((1, context, KV, HD), np.nan, np.float32))


def page_pools(n_pages, P):
    return (np.full((n_pages, P, KV, HD), np.nan, np.float32),
            np.full((n_pages, P, KV, HD), np.nan, np.float32))


def write_all(kp, vp, table, P, k, v, chunks):
    start = 0
    for n in chunks:
        kv_write.ref(kp, vp, table, P, start, k[start:start + n], v[start:start + n])
        start += n


@pytest.mark.parametrize("n", [1, 5, 13])
def test_a_row_reads_nothing_past_its_position(n):
    k, v, q = rows(n, 1)
    kp, vp = window_pools(16)                    # rows past n stay NaN
    kv_write.ref(kp, vp, (0,), 16, 0, k, v)
    out = attention.ref(q, kp, vp, (0,), 16, 0, SCALE)
    assert np.isfinite(out).all()
    for p in range(n):                           # row p alone, at its position, with rows past p NaN
        kq, vq = window_pools(16)
        kv_write.ref(kq, vq, (0,), 16, 0, k[:p + 1], v[:p + 1])
        one = attention.ref(q[p:p + 1], kq, vq, (0,), 16, p, SCALE)
        assert np.isfinite(one).all()
        assert one.tobytes() == out[p:p + 1].tobytes(), p


def test_each_row_is_softmax_over_rows_up_to_it():
    n = 6
    k, v, q = rows(n, 2)
    kp, vp = window_pools(8)
    kv_write.ref(kp, vp, (0,), 8, 0, k, v)
    out = attention.ref(q, kp, vp, (0,), 8, 0, SCALE)
    g = HQ // KV
    for p in range(n):
        for h in range(HQ):
            s = (k[:p + 1, h // g] @ q[p, h]) * SCALE
            w = np.exp(s - s.max())
            w /= w.sum()
            assert np.allclose(out[p, h], w @ v[:p + 1, h // g], atol=1e-5)


@pytest.mark.parametrize("P", [1, 3, 4, 16])
def test_a_window_and_pages_hold_the_rows_in_the_same_order(P):
    n = 14
    k, v, q = rows(n, 3)
    kw, vw = window_pools(16)
    write_all(kw, vw, (0,), 16, k, v, [n])
    pages = -(-16 // P)
    table = tuple(reversed(range(pages)))[:pages]  # pages out of id order
    table = tuple(np.random.default_rng(P).permutation(pages).tolist())
    kp, vp = page_pools(pages, P)
    write_all(kp, vp, table, P, k, v, [3, 1, 6, 4])
    gw = attention.gather_rows(kw, (0,), 16, n)
    gp = attention.gather_rows(kp, table, P, n)
    assert gw.tobytes() == gp.tobytes() == k.tobytes()
    assert attention.gather_rows(vp, table, P, n).tobytes() == v.tobytes()
    for start in (0, 5, 13):
        a = attention.ref(q[start:], kw, vw, (0,), 16, start, SCALE)
        b = attention.ref(q[start:], kp, vp, table, P, start, SCALE)
        assert a.tobytes() == b.tobytes(), start


def test_chunked_prefill_equals_whole_prefill():
    n, P = 11, 4
    k, v, q = rows(n, 4)
    kp, vp = page_pools(4, P)
    write_all(kp, vp, (2, 0, 3), P, k, v, [n])
    whole = attention.ref(q, kp, vp, (2, 0, 3), P, 0, SCALE)
    parts = np.concatenate([attention.ref(q[a:b], kp, vp, (2, 0, 3), P, a, SCALE)
                            for a, b in ((0, 3), (3, 4), (4, 11))])
    assert whole.tobytes() == parts.tobytes()
