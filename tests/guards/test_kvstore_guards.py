"""KVStore's page tables: pages and windows address the same rows, poison marks exactly
what a stream is about to write, and window <-> cache copies move rows page by page."""
from __future__ import annotations

import numpy as np
import pytest

from server.engine.kvstore import KVStore


def store(paged, dtype=np.float32, cache_pages=0, pages=6, streams=3, context=10, page_rows=4):
    return KVStore(np, 2, 1, 2, dtype, paged=paged, pages=pages, page_rows=page_rows,
                   streams=streams, context=context, cache_pages=cache_pages)


def test_shapes_and_bytes():
    p = store(True)
    assert p.K.shape == p.V.shape == (2, 6, 4, 1, 2) and p.cK is None and p.cV is None
    assert p.nbytes == 2 * 6 * 4 * 2 * 4 * 2
    w = store(False, cache_pages=5)
    assert w.K.shape == (2, 3, 10, 1, 2) and w.cK.shape == w.cV.shape == (2, 5, 4, 1, 2)
    assert w.nbytes == 2 * (2 * 3 * 10 * 2 * 4) + 2 * (2 * 5 * 4 * 2 * 4)
    assert store(True, cache_pages=5).cK is None           # pages: the cache keeps pool pages
    assert store(False).cK is None
    assert p.k(1) is not None and np.shares_memory(p.k(1), p.K) and p.k(1).shape == (6, 4, 1, 2)
    assert np.shares_memory(p.v(0), p.V) and not np.shares_memory(p.v(0), p.K)
    assert (p.paged, p.page_rows, p.context) == (True, 4, 10)
    plain = KVStore(np, 1, 1, 2, np.float16, paged=False, pages=0, page_rows=4, streams=2, context=8)
    assert plain.cK is None and plain.cV is None                 # no cache unless asked
    assert w.cK.dtype == w.cV.dtype == w.K.dtype == w.V.dtype == np.float32
    h = store(False, np.float16, cache_pages=2)
    assert h.cK.dtype == h.cV.dtype == h.K.dtype == h.V.dtype == np.float16


def test_address():
    assert store(True).address(2, [5, 1, 3]) == ((5, 1, 3), 4)
    assert store(False).address(2, [5, 1, 3]) == ((2,), 10)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_poison_on_pages_fills_the_fresh_pages_only(dtype):
    s = store(True, dtype)
    s.K[:] = 0
    s.V[:] = 0
    s.poison(0, (4, 1, 3), kept=1)
    bad = lambda a: np.isnan(a.astype(np.float32))
    for A in (s.K, s.V):
        assert bad(A[:, [1, 3]]).all() and not bad(A[:, [0, 2, 4, 5]]).any()
    s.poison(0, (2,), kept=1)                              # all kept: nothing to fill
    assert not bad(s.K[:, 2]).any()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_poison_on_windows_fills_the_stream_window(dtype):
    s = store(False, dtype)
    s.K[:] = 0
    s.V[:] = 0
    s.poison(1, (), kept=0)
    for A in (s.K, s.V):
        f = A.astype(np.float32)
        assert np.isnan(f[:, 1]).all() and not np.isnan(f[:, [0, 2]]).any()


def test_copy_window_rows_to_cache_pages_and_back():
    s = store(False, cache_pages=4, context=12)
    s.K[:] = np.arange(s.K.size, dtype=np.float32).reshape(s.K.shape)
    s.V[:] = -s.K
    s.cK[:] = 0
    s.cV[:] = 0
    s.copy_window_pages(1, (2, -1, 0, 3), rows=10, to_pages=True)
    assert (s.cK[:, 2] == s.K[:, 1, 0:4]).all() and (s.cV[:, 2] == s.V[:, 1, 0:4]).all()
    assert (s.cK[:, 1] == 0).all()                           # -1: skipped
    assert (s.cK[:, 0, :2] == s.K[:, 1, 8:10]).all() and (s.cK[:, 0, 2:] == 0).all()
    assert (s.cV[:, 0, :2] == s.V[:, 1, 8:10]).all()
    assert (s.cK[:, 3] == 0).all()                           # past the rows: not touched
    before = s.K.copy()
    s.K[:, 2] = 7
    s.V[:, 2] = 7
    s.copy_window_pages(2, (2, 1, 0), rows=10, to_pages=False)
    assert (s.K[:, 2, 0:4] == s.cK[:, 2]).all() and (s.V[:, 2, 0:4] == s.cV[:, 2]).all()
    assert (s.K[:, 2, 4:8] == s.cK[:, 1]).all() and (s.K[:, 2, 8:10] == s.cK[:, 0, :2]).all()
    assert (s.V[:, 2, 8:10] == s.cV[:, 0, :2]).all()
    assert (s.K[:, 2, 10:] == 7).all()
    assert (s.K[:, [0, 1]] == before[:, [0, 1]]).all()
    s.copy_window_pages(0, (2, 1), rows=4, to_pages=False)   # one page: the second is past
    assert (s.K[:, 0, 4:8] == before[:, 0, 4:8]).all()


def test_poison_writes_the_canonical_nan_bits():
    # float32: the quiet NaN 0x7FC00000; 2-byte KV (bf16 on the GPU, fp16 here): 0x7FC0,
    # a NaN in both formats (fp16's own NaN would be 0x7E00)
    s = store(True, np.float32)
    s.K[:] = 0
    s.poison(0, (1,), kept=0)
    assert set(s.K[:, 1].view(np.uint32).ravel().tolist()) == {0x7FC00000}
    h = store(True, np.float16)
    h.K[:] = 0
    h.V[:] = 0
    h.poison(0, (2,), kept=0)
    assert set(h.K[:, 2].view(np.uint16).ravel().tolist()) == {0x7FC0}
    assert set(h.V[:, 2].view(np.uint16).ravel().tolist()) == {0x7FC0}
    w = store(False, np.float16)
    w.K[:] = 0
    w.poison(0, (), kept=0)
    assert set(w.K[:, 0].view(np.uint16).ravel().tolist()) == {0x7FC0}
