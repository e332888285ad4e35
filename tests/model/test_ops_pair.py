"""Row-wise jobs run as two halves on two threads (kernels/halves.py: PAIR_FROM rows and more)
give the whole job's bytes: NumbaOps' q/k norms (rmsnorm.ref), the experts' SwiGLU
(swiglu.limited), a chunk's attention (attention.ref after kv_write.ref, chunk by chunk), RoPE in
one numba call (rope.ref), x's q8_K quantization (kquant_cpu.quantize) and the experts' combine
(moe_cpu.combine_grouped)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from kernels import attention, kv_write, rmsnorm, rope, swiglu

numba = pytest.importorskip("numba")


@pytest.fixture
def ops(monkeypatch):
    import kernels
    kernels.init()
    from kernels import halves, ops_cpu
    monkeypatch.setattr(halves, "threads", lambda: 2)       # pair whatever the host's threads
    return ops_cpu.NumbaOps()


def test_norm_and_swiglu_halves_are_the_definitions(ops):
    from kernels import halves
    rng = np.random.default_rng(0)
    for M in (halves.PAIR_FROM - 1, halves.PAIR_FROM, 301):
        x = (rng.standard_normal((M, 128)) * 3).astype(np.float32)
        w = rng.standard_normal(128).astype(np.float32)
        assert ops.rms_norm(x, w, 1e-6).tobytes() == rmsnorm.ref(x, w, 1e-6).tobytes(), M
        gu = (rng.standard_normal((M, 2 * 96)) * 4).astype(np.float32)
        g, u = gu[:, :96], gu[:, 96:]
        for limit in (0.0, 7.0):
            assert ops.swiglu_rows(g, u, limit).tobytes() == swiglu.limited(g, u, limit).tobytes(), (M, limit)


def test_swiglu_halves_in_blocks_of_rows_are_the_definition(ops, monkeypatch):
    """swiglu_rows' halves cut into blocks of rows (ops_cpu.SWIGLU_BLOCK elements: here small,
    so blocks of 1, 3 and 7 rows and a short last one; and the engine's size): swiglu.ref's
    bytes, gate and up strided (a fused gate|up's halves) or contiguous; overflowing exps
    (inf), -inf, NaN and -0 among them."""
    from kernels import ops_cpu
    rng = np.random.default_rng(5)
    M, F = 301, 96
    gu = (rng.standard_normal((M, 2 * F)) * 30).astype(np.float32)
    gu[7, :4] = [np.inf, -np.inf, np.nan, -0.0]
    gu[8, 5] = -100.0
    g, u = gu[:, :F], gu[:, F:]
    want = swiglu.ref(g, u).tobytes()
    for block in (1, 3 * F, 7 * F + 5, ops_cpu.SWIGLU_BLOCK):
        monkeypatch.setattr(ops_cpu, "SWIGLU_BLOCK", block)
        assert ops.swiglu_rows(g, u, 0.0).tobytes() == want, block
        assert ops.swiglu_rows(np.ascontiguousarray(g), np.ascontiguousarray(u), 0.0).tobytes() == want, block


def test_add_norm_halves_equal_the_whole_call(ops):
    from kernels import halves, rmsnorm_cpu as R
    rng = np.random.default_rng(3)
    for M in (halves.PAIR_FROM - 1, halves.PAIR_FROM, 301):
        h = (rng.standard_normal((M, 128)) * 3).astype(np.float32)
        out = (rng.standard_normal((M, 128)) * 3).astype(np.float32)
        w = rng.standard_normal(128).astype(np.float32)
        x1, h1 = ops.add_norm(None, h, w, 1e-6)
        x0 = np.empty_like(h)
        R.rms_norm(h, w, 1e-6, x0)
        assert x1.tobytes() == x0.tobytes() and h1 is h, M
        x2, h2 = ops.add_norm(out, h, w, 1e-6)
        x0, h0 = np.empty_like(h), np.empty_like(h)
        R.add_rms_norm(out, h, w, 1e-6, x0, h0)
        assert x2.tobytes() == x0.tobytes() and h2.tobytes() == h0.tobytes(), M


def test_rope_is_the_definition(ops):
    rng = np.random.default_rng(1)
    for shape in ((300, 8, 128), (5, 2, 64), (1, 32, 128)):
        x = (rng.standard_normal(shape) * 3).astype(np.float32)
        pos = np.arange(11, 11 + shape[0])
        inv = rope.inv_freq(shape[-1], 1e6)
        assert ops.apply_rope(x, pos, inv).tobytes() == rope.ref(x, pos, inv).tobytes(), shape


def test_attention_halves_are_the_definition(ops):
    from kernels import halves
    rng = np.random.default_rng(2)
    P, KV, hd, nq = 16, 4, 64, 16
    spans = [(0, 150), (150, 155), (155, 155 + halves.PAIR_FROM)]
    starts = [37, 200, 0]
    chunks = [SimpleNamespace(table=np.arange(30 * i, 30 * i + 30)[::-1].copy(), page_rows=P, start=s)
              for i, s in enumerate(starts)]
    rows = SimpleNamespace(spans=spans, chunks=chunks)
    T = spans[-1][1]
    q = rng.standard_normal((T, nq, hd)).astype(np.float32)
    k = rng.standard_normal((T, KV, hd)).astype(np.float32)
    v = rng.standard_normal((T, KV, hd)).astype(np.float32)
    pools = []
    for _ in range(2):
        kp = np.zeros((90, P, KV, hd), np.float32)
        vp = np.zeros_like(kp)
        for c in chunks:            # each stream's earlier rows
            kv_write.ref(kp, vp, c.table, P, 0, np.ones((c.start, KV, hd), np.float32) * 0.1,
                         np.ones((c.start, KV, hd), np.float32))
        pools.append((kp, vp))
    want = np.empty(q.shape, np.float32)
    kp, vp = pools[0]
    for (a, b), c in zip(spans, chunks):
        kv_write.ref(kp, vp, c.table, P, c.start, k[a:b], v[a:b])
        want[a:b] = attention.ref(q[a:b], kp, vp, c.table, P, c.start, 0.125)
    got = ops.write_and_attend(q, k, v, *pools[1], rows, 0.125)
    assert got.tobytes() == want.tobytes()
    assert pools[1][0].tobytes() == kp.tobytes() and pools[1][1].tobytes() == vp.tobytes()


def test_quantize_and_combine_halves_are_whole(ops):
    from kernels import halves, kquant_cpu, moe_cpu
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((halves.PAIR_FROM + 37, 512)) * 2).astype(np.float32)
    got = kquant_cpu.quantize(x)
    q = np.empty(x.shape, np.int8)
    dx = np.empty((x.shape[0], 2), np.float32)
    gs = np.empty((x.shape[0], 2, 16), np.int32)
    kquant_cpu.quantize_rows(x, q, dx, gs)
    for a, b in zip(got, (q, dx, gs)):
        assert a.tobytes() == b.tobytes()
    T, k, D = halves.PAIR_FROM + 5, 4, 96
    yd = rng.standard_normal((T * k, D)).astype(np.float32)
    pos = rng.permutation(T * k).reshape(T, k).astype(np.int64)
    wts = rng.random((T, k)).astype(np.float32)
    want = np.empty((T, D), np.float32)
    moe_cpu._combine(yd, pos, wts, want)
    assert moe_cpu.combine_grouped(yd, pos, wts).tobytes() == want.tobytes()
